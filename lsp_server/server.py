"""The language server: thin LSP handlers over completion.py, commands.py and backend.py.

Every handler has one shape: get the document, convert the position (positions.py), call the
domain function, and map its result to an lsprotocol type. Bad input (unknown documents, out of
range positions, invalid settings) gets an empty result or a message, never a crash.

`Protocol` is where messages meet pygls. It answers every request that has an id: malformed
params get -32602 InvalidParams and a malformed request object -32600 InvalidRequest, each with a
short message and no traceback; a request before `initialize` gets -32002, one after `shutdown`
-32600. None of these is a popup: the client made the mistake, and the reply tells it so. It
keeps the open documents in documents.py (pygls's workspace applies edits by other rules), and
`exit` cancels all work and ends the session (over stdio, the process) with 1 unless `shutdown`
came first.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import sys
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from cattrs.errors import BaseValidationError
from cattrs.v import transform_error
from lsprotocol import types as lsp
from pygls.exceptions import (
    FeatureRequestError,
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcRequestCancelled,
    JsonRpcServerNotInitialized,
)
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

from . import positions
from .backend import Backend, NotReady
from .commands import CommandError, Edit, fill_function_body, refine_selection, regenerate_selection
from .completion import Ask, Completer
from .documents import Document, Documents, clean
from .options import Options, describe, parse_options

if TYPE_CHECKING:
    from collections.abc import Generator

log = logging.getLogger("dllm-infill-ls")
FILL_BODY = "dllm.fillFunctionBody"
REFACTOR = "dllm.refactorSelection"
REFINE = "dllm.refineSelection"
STATUS = "dllm/status"
VERSION = "0.1.0"
CLIENT_ERRORS = {-32700, -32602, -32601, -32600, -32800, -32002}  # the client's, not ours


def why(error: Exception) -> str:
    """A short reason for a failed structure: cattrs' paths ('... @ $.params.position')."""
    reasons = transform_error(error) if isinstance(error, BaseValidationError) else [str(error)]
    return "; ".join(reasons[:3])[:240] or type(error).__name__


def _quick_exit(code: int) -> None:
    """The last step of a stdio server's exit, after the readers have unwound and the engine's
    worker has stopped: skip the interpreter's teardown of torch and a loaded model (seconds),
    of which the client, gone by now, would see nothing."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


class RawMessage(dict[str, Any]):
    """A JSON-RPC message as received: a dict, with `jsonrpc` readable as readers expect."""

    @property
    def jsonrpc(self) -> Any:
        return self.get("jsonrpc")


class Protocol(LanguageServerProtocol):
    """Negotiates the position encoding (utf-8 when the client offers it, else utf-16), checks
    every message before pygls dispatches it, owns text sync, and exits promptly."""

    _server: DllmServer
    _exiting = False  # after exit nothing more is written: the client has stopped reading

    def structure_message(self, data: dict[str, Any]) -> Any:
        # json.loads' object_hook, called on every object bottom-up, nested ones too: keep them
        # all raw, so that handle_message sees the whole message and can answer what is wrong.
        return RawMessage(data) if "jsonrpc" in data else data

    def handle_message(self, message: Any) -> None:
        if isinstance(message, dict):
            self._handle_raw(message)
        elif hasattr(message, "jsonrpc"):  # structured already, by another reader
            super().handle_message(message)
        else:
            self._reply_error(None, JsonRpcInvalidRequest("Invalid Request: not an object"))

    def _send_data(self, data: Any) -> None:
        if not self._exiting:
            super()._send_data(data)

    def _handle_raw(self, data: dict[str, Any]) -> None:
        method, msg_id = data.get("method"), data.get("id")
        id_ok = type(msg_id) in (int, str)
        if "id" not in data and isinstance(method, str) and data.get("jsonrpc") == "2.0":
            self._notification(method, data)
        elif "method" not in data and id_ok and ("result" in data or "error" in data):
            self._take_response(data)  # the client's reply to one of our requests
        elif data.get("jsonrpc") != "2.0" or not isinstance(method, str) or not id_ok:
            if "id" in data or "method" not in data:  # only a notification goes unanswered
                bad = JsonRpcInvalidRequest("Invalid Request: not a JSON-RPC 2.0 message")
                self._reply_error(msg_id if id_ok else None, bad)
        else:
            self._request(msg_id, method, data)

    def _request(self, msg_id: Any, method: str, data: dict[str, Any]) -> None:
        if self._shutdown:
            self._reply_error(msg_id, JsonRpcInvalidRequest("the server is shutting down"))
            return
        if self._workspace is None and method != lsp.INITIALIZE:
            self._reply_error(msg_id, JsonRpcServerNotInitialized("initialize first"))
            return
        kind = self.get_message_type(method)
        if kind is None:  # ours (dllm/status) or unknown: params are optional and raw
            message: Any = JsonRPCRequestMessage(msg_id, method, "2.0", data.get("params"))
        else:
            try:
                message = self._converter.structure(data, kind)
            except Exception as e:
                log.warning("invalid params for %s: %s", method, why(e))
                self._reply_error(msg_id, JsonRpcInvalidParams(f"Invalid Params: {why(e)}"))
                return
        super().handle_message(message)

    def _notification(self, method: str, data: dict[str, Any]) -> None:
        if method == lsp.EXIT:
            self._exit()
        if self._shutdown or self._workspace is None:
            return  # LSP: dropped before initialize and after shutdown
        if method == lsp.TEXT_DOCUMENT_DID_CHANGE:  # documents.py reads it change by change
            self._server.change_document(data.get("params"))
            return
        kind = self.get_message_type(method)
        try:
            message = self._converter.structure(data, kind) if kind else None
        except Exception as e:
            log.warning("ignored %s with invalid params: %s", method, why(e))
            return
        super().handle_message(message or JsonRPCNotification(method, "2.0", data.get("params")))

    def _take_response(self, data: dict[str, Any]) -> None:
        try:
            message = JsonRPCProtocol.structure_message(self, data)
        except JsonRpcException as e:  # a reply we cannot read: fail the request that waits
            future = self._request_futures.pop(data["id"], None)
            if future is not None and not future.done():
                future.set_exception(e)
            return
        super().handle_message(message)

    def _reply_error(self, msg_id: int | str | None, error: JsonRpcException) -> None:
        self._send_data(lsp.ResponseErrorMessage(id=msg_id, error=error.to_response_error()))

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        """pygls' reply, less the traceback: client errors are one log line, and our own errors
        keep their traceback in our log, not in the reply."""
        self._request_futures.pop(msg_id, None)
        if future.cancelled():
            self._reply_error(msg_id, JsonRpcRequestCancelled(f"request {msg_id!r} cancelled"))
            return
        error = future.exception()
        if error is None:
            self._send_response(msg_id, result=future.result())
        elif isinstance(error, JsonRpcException):
            log.warning("request %r: %s", msg_id, error.message)
            self._reply_error(msg_id, JsonRpcException(error.message, error.code))
        else:
            log.error("request %r failed", msg_id, exc_info=error)
            message = f"{type(error).__name__}: {error}"[:240]
            self._reply_error(msg_id, JsonRpcInternalError(message))

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(
        self, params: lsp.InitializeParams
    ) -> Generator[Any, Any, lsp.InitializeResult]:
        general = params.capabilities.general
        offered = general.position_encodings if general is not None else None
        chosen = positions.choose_encoding([getattr(e, "value", str(e)) for e in offered or []])
        if general is None:
            params.capabilities.general = general = lsp.GeneralClientCapabilities()
        general.position_encodings = [lsp.PositionEncodingKind(chosen)]
        return (yield from super().lsp_initialize(params))

    @lsp_method(lsp.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: lsp.DidOpenTextDocumentParams) -> None:
        d = params.text_document
        self._server.documents.open(d.uri, d.language_id, d.version, d.text)

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(
        self, params: lsp.DidCloseTextDocumentParams
    ) -> Generator[Any, Any, None]:
        self._server.documents.close(params.text_document.uri)
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        self._exit()
        yield from ()

    def _exit(self) -> None:
        """Raise SystemExit: 0 after shutdown, else 1 (LSP). Over stdio it ends the process,
        over TCP the session (tcp.py catches it). In-flight work is cancelled first, so the
        engine's worker stops at its next pass instead of holding up the interpreter's exit."""
        self._exiting = True
        for future in list(self._request_futures.values()):
            future.cancel()
        self._server.stop_work()
        code = 0 if self._shutdown else 1
        if isinstance(self.writer, StdoutWriter):  # stdio: the session is the process
            atexit.register(_quick_exit, code)  # registered last, so run first
        raise SystemExit(code)


class DllmServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "dllm-infill-ls",
            VERSION,
            protocol_cls=Protocol,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
        )
        self.options = Options()
        self.documents = Documents()
        self.backend = Backend(self.log)
        self.completer = Completer(self.backend, self.log)
        self.load_task: asyncio.Task[None] | None = None

    @property
    def encoding(self) -> str:
        enc = self.workspace.position_encoding or "utf-16"
        return str(getattr(enc, "value", enc))  # lsprotocol's enum, or a plain string

    def log(self, message: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        log.log(logging.WARNING if kind <= lsp.MessageType.Warning else logging.INFO, message)
        # No client attached yet (or any more): stderr has the line.
        with contextlib.suppress(Exception):
            self.window_log_message(lsp.LogMessageParams(type=kind, message=message))

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls' out-of-band errors. A client's mistake, or a failed write (the client has
        gone: telling it would fail again, and again), is a log line; only our own bugs in a
        notification handler become a popup."""
        if isinstance(error, JsonRpcException) and error.code in CLIENT_ERRORS:
            log.warning("%s", error)
        elif source is JsonRpcInternalError or source is FeatureRequestError:
            log.error("%s", error)
        else:
            with contextlib.suppress(Exception):
                self.window_show_message(
                    lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"dLLM: {error}")
                )

    def stop_work(self) -> None:
        """Cancel the model load and every engine call, and stop the engine's worker."""
        if self.load_task is not None:
            self.load_task.cancel()
        self.backend.close()

    def change_document(self, params: Any) -> None:
        outcome = self.documents.change(params, self.encoding)
        uri = params.get("textDocument", {}).get("uri") if isinstance(params, dict) else None
        if outcome == "out of sync":
            self.log(
                f"{uri}: a change did not follow the protocol; the document is out of sync and "
                "gets no completions until the editor sends it whole (reopen it)",
                lsp.MessageType.Warning,
            )
        elif outcome == "unknown":
            log.warning("didChange for a document that is not open: %.200r", uri)

    def tell(self, message: str, kind: lsp.MessageType = lsp.MessageType.Warning) -> None:
        self.log(message, kind)
        self.window_show_message(lsp.ShowMessageParams(type=kind, message=f"dLLM: {message}"))

    def apply_settings(self, raw: Any, initial: bool = False) -> None:
        old = self.options
        self.options, errors = parse_options(raw, base=None if initial else old)
        for e in errors:
            self.tell(e)
        self.completer.configure(self.options)
        if not initial and self.options.engine != old.engine:
            self.start_load()

    def start_load(self) -> None:
        if self.load_task is not None and not self.load_task.done():
            self.load_task.cancel()
        self.load_task = asyncio.get_running_loop().create_task(self._load())

    async def _load(self) -> None:
        opts = self.options.engine
        token = await self.progress_token("dllm-load", "dLLM: loading model")

        def report(message: str) -> None:
            if token is not None:
                self.work_done_progress.report(
                    token, lsp.WorkDoneProgressReport(message=message, percentage=10)
                )

        await self.backend.load(opts, report)
        ok = self.backend.state == "ready"
        if token is not None:
            done = "model ready" if ok else "model failed to load"
            self.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=done))
        if not ok:
            self.tell(
                f"cannot load model {opts.model!r}: {self.backend.error}", lsp.MessageType.Error
            )

    async def progress_token(self, kind: str, title: str) -> str | None:
        """Begin work-done progress if the client takes it; None (no progress) otherwise."""
        caps = self.client_capabilities.window
        if caps is None or not caps.work_done_progress:
            return None
        token = f"{kind}-{uuid.uuid4().hex[:8]}"
        try:
            await self.work_done_progress.create_async(token)
        except Exception as e:  # the client refused the token: carry on without progress
            self.log(f"no progress reporting: {e}")
            return None
        self.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(title=title, percentage=0))
        return token

    def document(self, uri: str) -> Document | None:
        """An open document in sync with the editor, or None: never read files the client did
        not open, nor serve text the editor no longer has."""
        doc = self.documents.get(uri)
        return doc if doc is not None and doc.in_sync else None

    def offset(self, doc: Document, pos: lsp.Position) -> int | None:
        return positions.offset_at(doc.text, pos.line, pos.character, self.encoding)

    def position(self, text: str, offset: int) -> lsp.Position:
        line, char = positions.position_at(text, offset, self.encoding)
        return lsp.Position(line=line, character=char)

    def range_offsets(self, doc: Document, r: lsp.Range) -> tuple[int, int] | None:
        a, b = self.offset(doc, r.start), self.offset(doc, r.end)
        return None if a is None or b is None else (min(a, b), max(a, b))

    async def apply(self, doc: Document, edit: Edit) -> dict[str, Any]:
        text = doc.text
        change = lsp.TextDocumentEdit(
            text_document=lsp.OptionalVersionedTextDocumentIdentifier(
                uri=doc.uri, version=doc.version
            ),
            edits=[
                lsp.TextEdit(
                    range=lsp.Range(self.position(text, edit.start), self.position(text, edit.end)),
                    new_text=edit.text,
                )
            ],
        )
        result = await self.workspace_apply_edit_async(
            lsp.ApplyWorkspaceEditParams(
                edit=lsp.WorkspaceEdit(document_changes=[change]), label=f"dLLM: {edit.what}"
            )
        )
        if not result.applied:
            self.tell(f"the editor did not apply the edit: {result.failure_reason or 'no reason'}")
        return {"applied": bool(result.applied), "message": edit.what, "text": edit.text}


def build_server() -> DllmServer:
    """The server with its handlers. Over TCP, tcp.serve_tcp checks the token before any frame
    reaches it."""
    server = DllmServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: DllmServer, params: lsp.InitializeParams) -> None:
        ls.apply_settings(params.initialization_options, initial=True)

    @server.feature(lsp.INITIALIZED)
    def initialized(ls: DllmServer, params: lsp.InitializedParams) -> None:
        ls.log(f"dllm-infill-ls {VERSION}; position encoding {ls.encoding}; {describe(ls.options)}")
        ls.start_load()

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: DllmServer, params: lsp.DidChangeConfigurationParams) -> None:
        ls.apply_settings(params.settings)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DllmServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.completer.forget(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_INLINE_COMPLETION, lsp.InlineCompletionOptions())
    async def inline_completion(
        ls: DllmServer, params: lsp.InlineCompletionParams
    ) -> lsp.InlineCompletionList:
        empty = lsp.InlineCompletionList(items=[])
        doc = ls.document(params.text_document.uri)
        offset = None if doc is None else ls.offset(doc, params.position)
        if doc is None or offset is None:
            return empty
        invoked = params.context.trigger_kind == lsp.InlineCompletionTriggerKind.Invoked
        ask = Ask(doc.uri, doc.text, offset, doc.language_id or "", invoked)
        try:
            texts = await ls.completer.complete(ask, ls.options)
        except NotReady:
            return empty
        except (ValueError, RuntimeError) as e:
            ls.log(f"inline completion failed: {e}", lsp.MessageType.Error)
            return empty
        at = ls.position(doc.text, offset)
        return lsp.InlineCompletionList(
            items=[lsp.InlineCompletionItem(insert_text=t, range=lsp.Range(at, at)) for t in texts]
        )

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.RefactorRewrite]),
    )
    def code_action(ls: DllmServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        doc = ls.document(params.text_document.uri)
        span = None if doc is None else ls.range_offsets(doc, params.range)
        if doc is None or span is None or not doc.text[span[0] : span[1]].strip():
            return []  # only a non-empty selection can be regenerated
        wanted = params.context.only
        if wanted and not any(lsp.CodeActionKind.RefactorRewrite.startswith(k) for k in wanted):
            return []
        args = [doc.uri, ls.protocol._converter.unstructure(params.range)]
        return [
            lsp.CodeAction(
                title=title,
                kind=lsp.CodeActionKind.RefactorRewrite,
                command=lsp.Command(title=title, command=command, arguments=args),
            )
            for title, command in (
                ("dLLM: regenerate selection", REFACTOR),
                ("dLLM: refine selection (remask unlikely tokens)", REFINE),
            )
        ]

    async def run_command(ls: DllmServer, title: str, work: Any) -> dict[str, Any]:
        token = await ls.progress_token("dllm-cmd", f"dLLM: {title}")
        try:
            return dict(await work)
        except (CommandError, NotReady, ValueError) as e:
            ls.tell(f"{title}: {e}")
            return {"applied": False, "message": str(e)}
        finally:
            if token is not None:
                ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd())

    @server.command(FILL_BODY)
    async def fill_body(ls: DllmServer, *args: Any) -> dict[str, Any]:
        async def work() -> dict[str, Any]:
            doc, pos = _doc_and(ls, args, lsp.Position)
            offset = ls.offset(doc, pos)
            if offset is None:
                raise CommandError(f"position {pos.line}:{pos.character} is outside the document")
            lang = doc.language_id or ""
            return await ls.apply(
                doc, await fill_function_body(ls.backend, doc.text, offset, lang, ls.options)
            )

        return await run_command(ls, "fill function body", work())

    @server.command(REFACTOR)
    async def refactor(ls: DllmServer, *args: Any) -> dict[str, Any]:
        async def work() -> dict[str, Any]:
            doc, span = _doc_and_selection(ls, args)
            instruction = clean(args[2]) if len(args) > 2 and isinstance(args[2], str) else None
            edit = await regenerate_selection(
                ls.backend, doc.text, span[0], span[1], instruction, ls.options
            )
            return await ls.apply(doc, edit)

        return await run_command(ls, "regenerate selection", work())

    @server.command(REFINE)
    async def refine(ls: DllmServer, *args: Any) -> dict[str, Any]:
        async def work() -> dict[str, Any]:
            doc, span = _doc_and_selection(ls, args)
            edit = await refine_selection(ls.backend, doc.text, span[0], span[1], ls.options)
            return await ls.apply(doc, edit)

        return await run_command(ls, "refine selection", work())

    @server.feature(STATUS)
    def status(ls: DllmServer, params: Any) -> dict[str, Any]:
        return {
            **ls.backend.status(),
            "encoding": ls.encoding,
            "typeahead_hits": ls.completer.typeahead.hits,
            "settings": describe(ls.options, nested=True),
            "documents": ls.documents.summary(),
        }

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: DllmServer, params: Any) -> None:
        ls.backend.close()

    return server


def _doc_and_selection(ls: DllmServer, args: tuple[Any, ...]) -> tuple[Document, tuple[int, int]]:
    """(document, (start, end) offsets) from a command's [uri, range, ...] arguments."""
    doc, rng = _doc_and(ls, args, lsp.Range)
    span = ls.range_offsets(doc, rng)
    if span is None:
        raise CommandError("the selection is outside the document")
    return doc, span


def _doc_and(ls: DllmServer, args: tuple[Any, ...], kind: type[Any]) -> tuple[Document, Any]:
    """(document, Position or Range) from a command's [uri, position-or-range, ...] arguments.

    Malformed arguments are the client's mistake (InvalidParams); a document that is not open,
    or out of sync, is the user's to hear about (CommandError)."""
    name = kind.__name__.lower()
    if len(args) < 2 or not isinstance(args[0], str):
        raise JsonRpcInvalidParams(f"Invalid Params: arguments must be [uri, {name}, ...]")
    doc = ls.documents.get(args[0])
    if doc is None:
        raise CommandError(f"{args[0]} is not open")
    if not doc.in_sync:
        raise CommandError(f"{args[0]} is out of sync with the editor; reopen it")
    try:
        value = ls.protocol._converter.structure(args[1], kind)
    except Exception as e:
        raise JsonRpcInvalidParams(f"Invalid Params: bad {name}: {why(e)}") from e
    return doc, value
