"""`DllmServer`: one editor session's state and the services the handlers share: settings (the
user's, and those in force, clamped to the loaded model, each clamp told once), the open
documents, the engine backend and its loads, messages to the user, progress, edits.

Engine changes reload once the settings have been quiet for RELOAD_QUIET_S, so a burst of
changes loads at most twice. How messages are checked before they reach the handlers, and how
the session exits, is protocol/jsonrpc.py's; the handlers themselves are protocol/handlers.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import FeatureRequestError, JsonRpcException, JsonRpcInternalError
from pygls.lsp.server import LanguageServer

from infill_engine.model_names import quoted

from ..commands.editing import Edit
from ..completion.inline import Completer
from ..engines.backend import Backend
from ..options import EngineOptions, Options, fit_model, parse_options
from ..workspace import positions
from ..workspace.crossfile import edited_line
from ..workspace.documents import Document, Documents
from .jsonrpc import CLIENT_ERRORS, Protocol
from .telemetry import Stats, state_file

log = logging.getLogger("dllm-infill-ls")
VERSION = "0.1.0"
RELOAD_QUIET_S = 0.5  # editors send a settings change per keystroke: reload once they stop
CONFIRM = "dllm.replacesCode"  # the change annotation of an edit that overwrites code


class DllmServer(LanguageServer):
    protocol: Protocol  # the protocol_cls given to pygls below

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
        self.stats = Stats(state_file())  # acceptance counts and health, on this machine only
        self.load_task: asyncio.Task[None] | None = None
        self.index_task: asyncio.Task[None] | None = None  # the workspace index's build
        self.closing = threading.Event()  # stops the index's build thread
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
        self.closing.set()
        if self.index_task is not None:
            self.index_task.cancel()
        self.backend.close()

    def change_document(self, params: Any) -> None:
        outcome = self.documents.change(params, self.encoding)
        uri = params.get("textDocument", {}).get("uri") if isinstance(params, dict) else None
        doc = self.documents.get(uri) if outcome == "applied" and isinstance(uri, str) else None
        line = edited_line(params) if self.options.context.cross_file else None
        if doc is not None and line is not None:  # the lines around the edit: context elsewhere
            self.completer.crossfile.edited(doc.uri, doc.text, line)
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
        positions = self.backend.positions  # None: no model yet, or a service that does not say
        if positions is None:
            self.options, notes = self.settings, list(self._clamps)
        else:
            self.options, notes = fit_model(self.settings, positions)
        for note in notes:
            if note not in self._clamps:
                self.tell(note)
        self._clamps = set(notes)
        self.completer.configure(self.options)
        self.stats.configure(self.options.stats.enabled, self.options.stats.slow_ms)

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
                failed = (
                    "model failed to load"
                    if opts.address is None
                    else "engine service out of reach"
                )
                done = {"ready": "model ready", "failed": failed}
                message = done.get(self.backend.state, "stopped")
                self.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=message))
        if self.backend.state == "ready":
            self.fit_settings()
        elif opts.address is not None:  # no model loads here: the error names the service
            self.tell(
                self.backend.error or f"engine service {opts.address} failed", lsp.MessageType.Error
            )
        else:
            self.tell(  # the model cut: a name may be 1024 characters, a popup is one line
                f"cannot load model {quoted(opts.model)}: {self.backend.error}",
                lsp.MessageType.Error,
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

    @property
    def can_confirm(self) -> bool:
        """Whether the client asks the user before an edit whose change annotation needs
        confirmation (VS Code: the refactor preview)."""
        ws = self.client_capabilities.workspace
        edits = ws.workspace_edit if ws is not None else None
        return bool(edits and edits.document_changes and edits.change_annotation_support)

    async def apply(self, doc: Document, edit: Edit) -> dict[str, Any]:
        text = doc.text
        rng = lsp.Range(self.position(text, edit.start), self.position(text, edit.end))
        one: lsp.TextEdit | lsp.AnnotatedTextEdit = lsp.TextEdit(range=rng, new_text=edit.text)
        annotations = None
        if edit.confirm is not None:  # overwrites code: the editor asks the user first
            one = lsp.AnnotatedTextEdit(annotation_id=CONFIRM, range=rng, new_text=edit.text)
            annotations = {
                CONFIRM: lsp.ChangeAnnotation(
                    label=f"dLLM: {edit.what}", needs_confirmation=True, description=edit.confirm
                )
            }
        change = lsp.TextDocumentEdit(
            text_document=lsp.OptionalVersionedTextDocumentIdentifier(
                uri=doc.uri, version=doc.version
            ),
            edits=[one],
        )
        result = await self.workspace_apply_edit_async(
            lsp.ApplyWorkspaceEditParams(
                edit=lsp.WorkspaceEdit(document_changes=[change], change_annotations=annotations),
                label=f"dLLM: {edit.what}",
            )
        )
        if not result.applied and edit.confirm is not None:
            self.tell("not applied: the change was not confirmed", lsp.MessageType.Info)
        elif not result.applied:
            self.tell(f"the editor did not apply the edit: {result.failure_reason or 'no reason'}")
        return {"applied": bool(result.applied), "message": edit.what, "text": edit.text}
