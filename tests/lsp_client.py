"""Helpers for the end-to-end tests: they drive the real `dllm-infill-ls` over stdio with
pytest-lsp's client, the real engine and the builtin model."""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

SERVER = [sys.executable, "-m", "lsp_server", "--log-level", "WARNING"]
# A function with an empty body line (line 2, character 4): the builtin model completes there.
GREET = 'def greet(name):\n    """Return a greeting for name."""\n    \n\n\nprint(greet("world"))\n'
# One token per step over a long span, no cache, no early end: a request of many seconds.
SLOW = {
    "decode": {"policy": "fixed", "span": 300, "maxSpan": 300, "minTokens": 300, "cache": "none"}
}


def take_frame(buf: bytes) -> tuple[dict[str, Any] | None, bytes]:
    """The first whole JSON-RPC frame in buf, and what follows it; (None, buf) if none yet."""
    head, sep, rest = buf.partition(b"\r\n\r\n")
    if sep:
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        if len(rest) >= length:
            return dict(json.loads(rest[:length])), rest[length:]
    return None, buf


def init_params(
    settings: dict[str, Any] | None = None,
    encodings: list[str] | None = None,
    progress: bool = True,
    annotations: bool = False,
    folders: list[Path] | None = None,
) -> lsp.InitializeParams:
    """`annotations`: the client asks the user before an edit whose change annotation needs
    confirmation, as VS Code does (workspace.workspaceEdit.changeAnnotationSupport)."""
    caps = lsp.ClientCapabilities(
        general=lsp.GeneralClientCapabilities(
            position_encodings=[
                lsp.PositionEncodingKind(e)
                for e in (["utf-16"] if encodings is None else encodings)
            ]
        ),
        window=lsp.WindowClientCapabilities(work_done_progress=progress),
        workspace=lsp.WorkspaceClientCapabilities(
            apply_edit=True,
            workspace_edit=lsp.WorkspaceEditClientCapabilities(
                document_changes=True,
                change_annotation_support=(
                    lsp.ChangeAnnotationsSupportOptions(groups_on_label=True)
                    if annotations
                    else None
                ),
            ),
        ),
    )
    # The tests of the model's own path see its fills on automatic triggers too, as with a real
    # checkpoint; the drafts tests leave trustModel to the server (tests/lsp/test_lsp_drafts.py).
    options = {"debounceMs": 0, "drafts": {"trustModel": True}, **(settings or {})}
    ws = [lsp.WorkspaceFolder(uri=f.resolve().as_uri(), name=f.name) for f in folders or []]
    return lsp.InitializeParams(
        capabilities=caps,
        initialization_options=options,
        workspace_folders=ws or None,
        root_uri=ws[0].uri if ws else None,
    )


def plain(value: Any) -> Any:
    """pygls hands untyped results over as namedtuples: back to dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


async def status(client: LanguageClient) -> dict[str, Any]:
    result = plain(await client.protocol.send_request_async("dllm/status", None))
    assert isinstance(result, dict)
    return result


async def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the condition did not come true")
        await asyncio.sleep(0.02)


async def start(client: LanguageClient, **kwargs: Any) -> lsp.InitializeResult:
    """Initialize, then wait until the model is loaded (or failed)."""
    result = await client.initialize_session(init_params(**kwargs))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (await status(client))["state"] in ("ready", "failed"):
            return result
        await asyncio.sleep(0.05)
    raise TimeoutError("the model did not load")


def open_doc(client: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
        )
    )


def change_doc(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def inline_params(
    uri: str, line: int, character: int, invoked: bool = True
) -> lsp.InlineCompletionParams:
    kind = (
        lsp.InlineCompletionTriggerKind.Invoked
        if invoked
        else lsp.InlineCompletionTriggerKind.Automatic
    )
    return lsp.InlineCompletionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=lsp.Position(line=line, character=character),
        context=lsp.InlineCompletionContext(trigger_kind=kind),
    )


async def inline(
    client: LanguageClient, uri: str, line: int, character: int, invoked: bool = True
) -> list[lsp.InlineCompletionItem]:
    result = await client.text_document_inline_completion_async(
        inline_params(uri, line, character, invoked)
    )
    if result is None:
        return []
    return list(result.items if isinstance(result, lsp.InlineCompletionList) else result)


def item_text(item: lsp.InlineCompletionItem) -> str:
    t = item.insert_text
    return t if isinstance(t, str) else t.value


class StdioPeer:
    """A raw JSON-RPC peer on the server's stdio (robustness and fuzz tests): sends any JSON,
    says yes to the server's requests (applyEdit, progress), and records replies by id, popups
    (`shown`, `errors` of type Error), log messages, applied edits and stderr."""

    def __init__(self, cmd: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            cmd or SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self.replies: dict[str, queue.Queue[dict[str, Any]]] = {}
        self.shown: list[str] = []  # window/showMessage texts
        self.errors: list[str] = []  # those of type Error
        self.logged: list[str] = []  # window/logMessage texts
        self.edits: list[dict[str, Any]] = []  # workspace/applyEdit params
        self.stderr = bytearray()
        self.next_id = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        self._stderr = threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True)
        self._stderr.start()

    def _drain(self, stream: IO[bytes]) -> None:
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            self.stderr += chunk

    def _read(self, stream: IO[bytes]) -> None:
        while True:
            length = 0
            while (line := stream.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                return
            self._dispatch(json.loads(stream.read(length)))

    def _dispatch(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if method == "window/showMessage":
            self.shown.append(msg["params"]["message"])
            if msg["params"]["type"] == 1:
                self.errors.append(msg["params"]["message"])
        elif method == "window/logMessage":
            self.logged.append(msg["params"]["message"])
        elif method is not None and "id" in msg:  # the server asks: say yes
            if method == "workspace/applyEdit":
                self.edits.append(msg["params"])
            result = {"applied": True} if method == "workspace/applyEdit" else None
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        elif method is None:
            self._box(json.dumps(msg.get("id"))).put(msg)

    def _box(self, key: str) -> queue.Queue[dict[str, Any]]:
        with self._lock:
            return self.replies.setdefault(key, queue.Queue())

    def send(self, msg: Any) -> None:
        # json.dumps' defaults: a lone surrogate goes as "\ud800", NaN as Python writes it
        body = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.proc.stdin.flush()

    def ask(self, method: Any, params: Any = None, omit: bool = False, **extra: Any) -> int:
        """Send a request (without `params` when `omit`); its id."""
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, **extra}
        if not omit:
            msg["params"] = params
        self.send(msg)
        return self.next_id

    def reply(self, msg_id: Any, timeout: float = 30.0) -> dict[str, Any]:
        """The reply to a request; TimeoutError when none comes in time."""
        try:
            return self._box(json.dumps(msg_id)).get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no reply to request {msg_id!r} in {timeout} s") from None

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def open(self, uri: str, text: str, version: int = 1) -> None:
        doc = {"uri": uri, "languageId": "python", "version": version, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": doc})

    def wait_loaded(self, timeout: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while (s := self.status())["state"] not in ("ready", "failed"):
            assert time.monotonic() < deadline, "the model did not load"
            time.sleep(0.05)
        return s

    def status(self) -> dict[str, Any]:
        reply = self.reply(self.ask("dllm/status"))
        assert "result" in reply, reply
        return dict(reply["result"])

    def kill(self) -> None:
        """End the process, and read what it wrote to stderr up to its end."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._stderr.join(timeout=10)  # the pipe's end: every byte is in self.stderr
        assert not self._stderr.is_alive()
