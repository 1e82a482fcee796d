"""Where JSON-RPC messages meet pygls: every message is checked before pygls dispatches it.

`Protocol` answers every request that has an id: malformed params get -32602 InvalidParams and a
malformed request object -32600 InvalidRequest, each with a short message and no traceback; a
request before `initialize` gets -32002, one after `shutdown` -32600. None of these is a popup:
the client made the mistake, and the reply tells it so. It negotiates the position encoding,
keeps the open documents in documents.py (pygls's workspace applies edits by other rules), and
`exit` cancels all work and ends the session (over stdio, the process) with 1 unless `shutdown`
came first.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any
from typing import Protocol as Interface

from cattrs import Converter
from cattrs.errors import BaseValidationError
from cattrs.v import transform_error
from lsprotocol import types as lsp
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcRequestCancelled,
    JsonRpcServerNotInitialized,
)
from pygls.io_ import StdoutWriter
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

from infill_engine.finish.postprocess import Indent, formatting_indent

from ..workspace import positions
from ..workspace.documents import Documents

if TYPE_CHECKING:
    from collections.abc import Generator

log = logging.getLogger("dllm-infill-ls")
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


class Session(Interface):
    """What the protocol layer uses of the server's session state (server.DllmServer)."""

    documents: Documents

    def change_document(self, params: Any) -> None: ...
    def stop_work(self) -> None: ...


def _command_error(params: Any, commands: Mapping[str, Any]) -> str | None:
    """What is wrong with executeCommand's params before they are structured, or None. The
    `arguments` are an array, or absent: the converter would take a string for the list of its
    characters (the command then ran on a document named "f") and an object for the list of its
    keys. The command is a string (not a number made one), and an unknown one is named in at
    most 100 characters (pygls echoed all of it)."""
    if not isinstance(params, dict):
        return None  # the structure check says what is wrong
    args, command = params.get("arguments"), params.get("command")
    if args is not None and not isinstance(args, list):
        return "arguments must be an array"
    if not isinstance(command, str):  # the converter made str(10**400) of a number
        return "command must be a string" if "command" in params else None
    if command not in commands:
        return f"no command {command[:100]!r}"
    return None


class RawMessage(dict[str, Any]):
    """A JSON-RPC message as received: a dict, with `jsonrpc` readable as readers expect."""

    @property
    def jsonrpc(self) -> Any:
        return self.get("jsonrpc")


class Protocol(LanguageServerProtocol):
    """Negotiates the position encoding (utf-8 when the client offers it, else utf-16), checks
    every message before pygls dispatches it, owns text sync, and exits promptly."""

    _server: Session  # type: ignore[assignment]
    _exiting = False  # after exit nothing more is written: the client has stopped reading

    def __init__(self, server: Any, converter: Converter) -> None:
        super().__init__(server, converter)
        # the converter pygls built this protocol with, kept under a public name: the handlers
        # structure command arguments with it (pygls keeps it only as a private)
        self.converter = converter
        self.formatting: dict[str, Indent] = {}  # uri -> the editor's unit (_take_formatting)

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
        if method == lsp.WORKSPACE_EXECUTE_COMMAND and (
            wrong := _command_error(data.get("params"), self.fm.commands)
        ):
            self._reply_error(msg_id, JsonRpcInvalidParams(f"Invalid Params: {wrong}"))
            return
        if method == lsp.TEXT_DOCUMENT_INLINE_COMPLETION:
            self._take_formatting(data.get("params"))
        kind = self.get_message_type(method)
        if kind is None:  # ours (dllm/status) or unknown: params are optional and raw
            message: Any = JsonRPCRequestMessage(msg_id, method, "2.0", data.get("params"))
        else:
            try:
                message = self.converter.structure(data, kind)
            except Exception as e:
                log.warning("invalid params for %s: %s", method, why(e))
                self._reply_error(msg_id, JsonRpcInvalidParams(f"Invalid Params: {why(e)}"))
                return
        super().handle_message(message)

    def _take_formatting(self, params: Any) -> None:
        """An inline request may carry the editor's `formattingOptions` for the document (not
        in LSP's InlineCompletionParams, so the converter drops them): kept per document, the
        indentation of its items (postprocess.formatting_indent)."""
        if not isinstance(params, dict) or "formattingOptions" not in params:
            return
        doc = params.get("textDocument")
        uri = doc.get("uri") if isinstance(doc, dict) else None
        indent = formatting_indent(params["formattingOptions"])
        if isinstance(uri, str) and indent is not None:
            self.formatting[uri] = indent
        elif isinstance(uri, str):
            self.formatting.pop(uri, None)

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
            message = self.converter.structure(data, kind) if kind else None
        except Exception as e:
            log.warning("ignored %s with invalid params: %s", method, why(e))
            return
        super().handle_message(message or JsonRPCNotification(method, "2.0", data.get("params")))

    def _take_response(self, data: dict[str, Any]) -> None:
        waiting = self._request_futures.get(data["id"])
        if waiting is not None and waiting.done():  # we stopped waiting (cancelled): drop it
            del self._request_futures[data["id"]]
            return
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
    def lsp_text_document__did_open(
        self, params: lsp.DidOpenTextDocumentParams
    ) -> Generator[Any, Any, None]:
        d = params.text_document
        self._server.documents.open(d.uri, d.language_id, d.version, d.text)
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

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
