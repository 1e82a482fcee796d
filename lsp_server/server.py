"""The language server: thin LSP handlers over completion.py, commands.py and backend.py.

Every handler has one shape: get the document, convert the position (positions.py), call the
domain function, and map its result to an lsprotocol type. Bad input (unknown documents, out of
range positions, invalid settings) gets an empty result or a message, never a crash.

How messages are checked before they reach these handlers, and how the session exits, is
protocol.py's. `DllmServer` holds the session's state: settings, documents, the engine. Settings
in force are the user's clamped to the loaded model (each clamp told once); engine changes reload
once the settings have been quiet for RELOAD_QUIET_S, so a burst of changes loads at most twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import (
    FeatureRequestError,
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
)
from pygls.lsp.server import LanguageServer

from . import positions
from .backend import Backend, NotReady
from .commands import CommandError, Edit, fill_function_body, refine_selection, regenerate_selection
from .completion import Ask, Completer
from .documents import Document, Documents, clean
from .options import EngineOptions, Options, describe, fit_model, parse_options
from .protocol import CLIENT_ERRORS, Protocol, why

log = logging.getLogger("dllm-infill-ls")
FILL_BODY = "dllm.fillFunctionBody"
REFACTOR = "dllm.refactorSelection"
REFINE = "dllm.refineSelection"
STATUS = "dllm/status"
VERSION = "0.1.0"
LOAD_WAIT_S = 120.0  # the longest an inline request is held while the model loads
RELOAD_QUIET_S = 0.5  # editors send a settings change per keystroke: reload once they stop


class DllmServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "dllm-infill-ls",
            VERSION,
            protocol_cls=Protocol,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
        )
        self.settings = Options()  # as the user gave them
        self.options = self.settings  # in force: the settings, clamped to the loaded model
        self._clamps: set[str] = set()  # the clamps the user has been told of
        self.documents = Documents()
        self.backend = Backend(self.log, self.tell)
        self.completer = Completer(self.backend, self.log)
        self.load_task: asyncio.Task[None] | None = None
        self._quiet_until = 0.0  # event-loop time before which no load starts

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
        old = self.settings
        self.settings, errors = parse_options(raw, base=None if initial else old)
        for e in errors:
            self.tell(e)
        self.fit_settings()
        if not initial and self.settings.engine != old.engine:
            self.start_load(RELOAD_QUIET_S)

    def fit_settings(self) -> None:
        """Put the user's settings in force, clamped to the loaded model (once there is one).
        Each clamp is told once, while it lasts: reloads and other changes do not repeat it."""
        engine = self.backend.engine if self.backend.state == "ready" else None
        if engine is None:
            self.options, notes = self.settings, list(self._clamps)
        else:
            self.options, notes = fit_model(self.settings, engine.args.max_positions)
        for note in notes:
            if note not in self._clamps:
                self.tell(note)
        self._clamps = set(notes)
        self.completer.configure(self.options)

    async def loaded(self, timeout: float) -> bool:
        """Wait, at most `timeout` seconds, for a load in flight; True when the model is ready.
        The caller's own cancellation (the editor moved on) still ends the wait."""
        task = self.load_task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=timeout)
        return self.backend.state == "ready"

    def start_load(self, quiet_s: float = 0.0) -> None:
        """Load the engine the settings name once they have been quiet for `quiet_s`. A burst of
        changes coalesces: the load in flight runs to its end (a load cannot be stopped midway),
        then one more loads the latest settings."""
        loop = asyncio.get_running_loop()
        self._quiet_until = loop.time() + quiet_s
        if self.load_task is None or self.load_task.done():
            self.load_task = loop.create_task(self._load_latest())

    async def _load_latest(self) -> None:
        loaded = None
        while loaded != self.settings.engine:
            while (wait := self._quiet_until - asyncio.get_running_loop().time()) > 0:
                await asyncio.sleep(wait)
            loaded = self.settings.engine
            await self._load(loaded)

    async def _load(self, opts: EngineOptions) -> None:
        token = await self.progress_token("dllm-load", "dLLM: loading model")

        def report(message: str) -> None:
            if token is not None:
                self.work_done_progress.report(
                    token, lsp.WorkDoneProgressReport(message=message, percentage=10)
                )

        try:
            await self.backend.load(opts, report)
        finally:  # a bar that begins also ends, even when the session exits mid-load
            if token is not None:
                done = {"ready": "model ready", "failed": "model failed to load"}
                message = done.get(self.backend.state, "stopped")
                self.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=message))
        if self.backend.state == "ready":
            self.fit_settings()
        else:
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
        ask = Ask(doc.uri, doc.text, offset, doc.language_id or "", invoked, doc.syntax_tree())
        version = doc.version
        try:
            texts = await ls.completer.complete(ask, ls.options)
        except NotReady:
            # A request that arrives while the model loads is held, not dropped: editors do not
            # ask again by themselves, so an empty answer would mean no ghost text until the
            # next keystroke. The editor cancels it if the user moves on.
            if not await ls.loaded(LOAD_WAIT_S) or ls.document(doc.uri) is not doc:
                return empty
            if doc.version != version:
                return empty  # the text changed while we waited: the position is stale
            try:
                texts = await ls.completer.complete(ask, ls.options)
            except NotReady:
                return empty
        except Exception as e:  # the editor gets no items, the log the whole story
            log.error("inline completion failed", exc_info=e)
            ls.log(f"inline completion failed: {type(e).__name__}: {e}", lsp.MessageType.Error)
            return empty
        # Each item replaces the rest of the cursor's line with the fill followed by that rest:
        # the same document as an insertion, in the shape editors render mid-line (VS Code
        # draws the inserted parts as ghost text; Neovim 0.12 would otherwise overlay the
        # text right of the cursor). At a line's end the range is empty.
        eol = positions.line_end(doc.text, offset)
        rest = doc.text[offset:eol]
        at, end = ls.position(doc.text, offset), ls.position(doc.text, eol)
        return lsp.InlineCompletionList(
            items=[
                lsp.InlineCompletionItem(insert_text=t + rest, range=lsp.Range(at, end))
                for t in texts
            ]
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
        except JsonRpcException:
            raise  # the client's own mistake (bad arguments): its error response
        except Exception as e:  # a failure of ours or the model's: logged whole, user told
            log.error("%s failed", title, exc_info=e)
            ls.tell(f"{title} failed: {type(e).__name__}: {e}", lsp.MessageType.Error)
            return {"applied": False, "message": f"{type(e).__name__}: {e}"}
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
            instruction = args[2] if len(args) > 2 else None
            if instruction is not None and not isinstance(instruction, str):
                # dropped, the selection was rewritten without it and the edit applied
                raise JsonRpcInvalidParams("Invalid Params: the instruction must be a string")
            doc, span = _doc_and_selection(ls, args)
            instruction = clean(instruction) if instruction is not None else None
            edit = await regenerate_selection(
                ls.backend, doc.text, span[0], span[1], instruction, ls.options, doc.language_id
            )
            return await ls.apply(doc, edit)

        return await run_command(ls, "regenerate selection", work())

    @server.command(REFINE)
    async def refine(ls: DllmServer, *args: Any) -> dict[str, Any]:
        async def work() -> dict[str, Any]:
            doc, span = _doc_and_selection(ls, args)
            edit = await refine_selection(
                ls.backend, doc.text, span[0], span[1], ls.options, doc.language_id
            )
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
        ls.stop_work()  # a reload still waiting for quiet settings never starts

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
    uri = args[0] if len(args[0]) <= 200 else args[0][:200] + "…"  # a popup, not a page of it
    if doc is None:
        raise CommandError(f"{uri} is not open")
    if not doc.in_sync:
        raise CommandError(f"{uri} is out of sync with the editor; reopen it")
    try:
        value = ls.protocol._converter.structure(args[1], kind)
    except Exception as e:
        raise JsonRpcInvalidParams(f"Invalid Params: bad {name}: {why(e)}") from e
    return doc, value
