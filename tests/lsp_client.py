"""Helpers for the end-to-end tests: they drive the real `dllm-infill-ls` over stdio with
pytest-lsp's client, the real engine and the builtin model."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Any

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
) -> lsp.InitializeParams:
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
            workspace_edit=lsp.WorkspaceEditClientCapabilities(document_changes=True),
        ),
    )
    options = {"debounceMs": 0, **(settings or {})}
    return lsp.InitializeParams(capabilities=caps, initialization_options=options)


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
