"""The language server's handlers: thin, module-level, registered by `build_server`.

Every handler has one shape: get the document, convert the position (positions.py), call the
domain function (completion/inline.py, commands/editing.py), and map its result to an lsprotocol
type. Bad input (unknown documents, out of range positions, invalid settings) gets an empty result
or a message, never a crash. The session's state and shared services are session.py's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from infill_engine.fields import is_int
from infill_engine.finish.secrets import FILTERED
from infill_engine.workspace.index import uri_path

from ..commands.editing import (
    CommandError,
    fill_function_body,
    refine_selection,
    regenerate_selection,
)
from ..completion.edit_sources import HostedSource, ModelSource
from ..completion.inline import Ask
from ..completion.next_edit import NextEdits, Source, structure
from ..engines.backend import NotReady
from ..engines.link import RemoteError
from ..options import describe
from ..workspace import positions
from ..workspace.crossfile import roots_of
from ..workspace.documents import Document, clean
from .indexing import did_change_watched_files, index_workspace
from .jsonrpc import Protocol, why
from .next_edits import register as register_next_edits
from .session import RELOAD_QUIET_S, VERSION, DllmServer
from .telemetry import ACCEPT_COMMAND, DID_PARTIALLY_ACCEPT, DID_SHOW, command_id, item_id

__all__ = ["RELOAD_QUIET_S", "VERSION", "DllmServer", "build_server"]

log = logging.getLogger("dllm-infill-ls")
FILL_BODY = "dllm.fillFunctionBody"
REFACTOR = "dllm.refactorSelection"
REFINE = "dllm.refineSelection"
SNOOZE = "dllm.snooze"
STATUS = "dllm/status"
CONTEXT = "dllm/context"  # a notification: text the editor offers as context (say, yanked)
LOAD_WAIT_S = 120.0  # the longest an inline request is held while the model loads


def build_server() -> DllmServer:
    """The server with its handlers. Over TCP, tcp.serve_tcp checks the token before any frame
    reaches it."""
    server = DllmServer()
    server.feature(lsp.INITIALIZE)(initialize)
    server.feature(lsp.INITIALIZED)(initialized)
    server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)(did_save)
    server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)(did_change_watched_files)
    server.feature(CONTEXT)(push_context)
    server.feature(lsp.TEXT_DOCUMENT_INLINE_COMPLETION, lsp.InlineCompletionOptions())(
        inline_completion
    )
    actions = lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.RefactorRewrite])
    server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, actions)(code_action)
    server.command(FILL_BODY)(fill_body)
    server.command(REFACTOR)(refactor)
    server.command(REFINE)(refine)
    server.command(SNOOZE)(snooze)
    server.feature(STATUS)(status)
    server.command(ACCEPT_COMMAND)(accepted)
    server.feature(DID_SHOW)(did_show)
    server.feature(DID_PARTIALLY_ACCEPT)(did_partially_accept)
    # textDocument/copilotInlineEdit and its reports: structure, the model's rewrite, a hosted API
    sources: list[Source] = [structure, ModelSource(server.backend), HostedSource(server.tell)]
    register_next_edits(server, NextEdits(sources))
    server.feature(lsp.SHUTDOWN)(shutdown)
    return server


def initialize(ls: DllmServer, params: lsp.InitializeParams) -> None:
    ls.apply_settings(params.initialization_options, initial=True)


def initialized(ls: DllmServer, params: lsp.InitializedParams) -> None:
    ls.log(f"dllm-infill-ls {VERSION}; position encoding {ls.encoding}; {describe(ls.options)}")
    ls.start_load()
    if ls.options.drafts.enabled and ls.options.drafts.workspace:
        ls.index_task = asyncio.get_running_loop().create_task(index_workspace(ls))


def did_change_configuration(ls: DllmServer, params: lsp.DidChangeConfigurationParams) -> None:
    ls.apply_settings(params.settings)


def did_close(ls: DllmServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.completer.forget(params.text_document.uri)
    ls.completer.crossfile.closed(params.text_document.uri)


def did_open(ls: DllmServer, params: lsp.DidOpenTextDocumentParams) -> None:
    doc = ls.document(params.text_document.uri)
    if doc is not None and ls.options.context.cross_file:
        ls.completer.crossfile.roots = roots_of(ls.workspace)
        ls.completer.crossfile.opened(doc.uri, doc.text)


def did_save(ls: DllmServer, params: lsp.DidSaveTextDocumentParams) -> None:
    if ls.completer.workspace is not None and (path := uri_path(params.text_document.uri)):
        ls.completer.workspace.update(path)
    doc = ls.document(params.text_document.uri)
    if doc is not None and ls.options.context.cross_file:
        ls.completer.crossfile.saved(doc.uri, doc.text)


def push_context(ls: DllmServer, params: Any) -> None:
    """`dllm/context {text, uri?}`: text the editor offers as context for other documents'
    completions (yanked, say); with `uri`, never for that document's own."""
    text = _field(params, "text")
    uri = _field(params, "uri")
    if isinstance(text, str) and ls.options.context.cross_file:
        ls.completer.crossfile.pushed(clean(text), uri if isinstance(uri, str) else None)


async def inline_completion(
    ls: DllmServer, params: lsp.InlineCompletionParams
) -> lsp.InlineCompletionList:
    empty = lsp.InlineCompletionList(items=[])
    doc = ls.document(params.text_document.uri)
    offset = None if doc is None else ls.offset(doc, params.position)
    if doc is None or offset is None:
        return empty
    invoked = params.context.trigger_kind == lsp.InlineCompletionTriggerKind.Invoked
    started, cached = time.perf_counter(), ls.completer.typeahead.hits
    indent = ls.protocol.formatting.get(doc.uri) if isinstance(ls.protocol, Protocol) else None
    edits = tuple(doc.history.edits())
    ask = Ask(
        doc.uri, doc.text, offset, doc.language_id or "", invoked, doc.syntax_tree(), indent, edits
    )
    ls.documents.viewed.saw(doc.uri, doc.text, offset)  # what the user looks at: next edits read it
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
        # an engine's error (a remote's bad answer) is the one line below, its traceback at DEBUG
        log.log(logging.DEBUG if isinstance(e, RemoteError) else logging.ERROR,
                "inline completion failed", exc_info=e)  # fmt: skip
        ls.log(f"inline completion failed: {type(e).__name__}: {e}", lsp.MessageType.Error)
        ls.stats.request(doc.language_id or "", 1000 * (time.perf_counter() - started), ok=False)
        return empty
    lang = doc.language_id or ""
    if ls.completer.typeahead.hits == cached:  # typed-ahead answers say nothing of the backend
        ls.stats.request(lang, 1000 * (time.perf_counter() - started), ok=True)
    # Each item replaces the rest of the cursor's line with the fill followed by that rest:
    # the same document as an insertion, in the shape editors render mid-line (VS Code
    # draws the inserted parts as ghost text; Neovim 0.12 would otherwise overlay the
    # text right of the cursor). At a line's end the range is empty.
    eol = positions.line_end(doc.text, offset)
    rest = doc.text[offset:eol]
    at, end = ls.position(doc.text, offset), ls.position(doc.text, eol)
    return lsp.InlineCompletionList(
        items=[
            lsp.InlineCompletionItem(
                insert_text=t + rest,
                range=lsp.Range(at, end),
                command=_accept_command(ls, lang, ls.completer.source_of(doc.uri, t)),
            )
            for t in texts
        ]
    )


def _accept_command(ls: DllmServer, language: str, source: str) -> lsp.Command | None:
    """The command the editor runs when the user accepts the item: it names the item, so that
    the acceptance and the editor's reports about it are counted once, by language and by
    source (telemetry.py)."""
    key = ls.stats.issue(language, source)
    if key is None:
        return None  # counting is off
    arg = {"id": key, "languageId": language, "source": source}
    return lsp.Command(title="dLLM: completion accepted", command=ACCEPT_COMMAND, arguments=[arg])


def accepted(ls: DllmServer, *args: Any) -> None:
    ls.stats.accepted(command_id(args[0] if args else None))


def did_show(ls: DllmServer, params: Any) -> None:
    ls.stats.shown(item_id(params.get("item") if isinstance(params, dict) else None))


def did_partially_accept(ls: DllmServer, params: Any) -> None:
    if not isinstance(params, dict):
        return
    length = params.get("acceptedLength")
    if is_int(length):
        ls.stats.partially_accepted(item_id(params.get("item")), length)


def code_action(ls: DllmServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    doc = ls.document(params.text_document.uri)
    span = None if doc is None else ls.range_offsets(doc, params.range)
    if doc is None or span is None or not doc.text[span[0] : span[1]].strip():
        return []  # only a non-empty selection can be regenerated
    wanted = params.context.only
    if wanted and not any(lsp.CodeActionKind.RefactorRewrite.startswith(k) for k in wanted):
        return []
    args = [doc.uri, ls.protocol.converter.unstructure(params.range)]
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


async def fill_body(ls: DllmServer, *args: Any) -> dict[str, Any]:
    async def work() -> dict[str, Any]:
        doc, pos = _doc_and(ls, args, lsp.Position)
        offset = ls.offset(doc, pos)
        if offset is None:
            raise CommandError(f"position {pos.line}:{pos.character} is outside the document")
        lang = doc.language_id or ""
        edit = await fill_function_body(
            ls.backend, doc.text, offset, lang, ls.options, ls.can_confirm
        )
        return await ls.apply(doc, edit)

    return await run_command(ls, "fill function body", work())


async def refactor(ls: DllmServer, *args: Any) -> dict[str, Any]:
    async def work() -> dict[str, Any]:
        instruction = args[2] if len(args) > 2 else None
        if instruction is not None and not isinstance(instruction, str):
            # dropped, the selection was rewritten without it and the edit applied
            raise JsonRpcInvalidParams("Invalid Params: the instruction must be a string")
        doc, span = _doc_and_selection(ls, args)
        instruction = clean(instruction) if instruction is not None else None
        edit = await regenerate_selection(
            ls.backend,
            doc.text,
            span[0],
            span[1],
            instruction,
            ls.options,
            doc.language_id,
            ls.can_confirm,
        )
        return await ls.apply(doc, edit)

    return await run_command(ls, "regenerate selection", work())


async def refine(ls: DllmServer, *args: Any) -> dict[str, Any]:
    async def work() -> dict[str, Any]:
        doc, span = _doc_and_selection(ls, args)
        edit = await refine_selection(
            ls.backend,
            doc.text,
            span[0],
            span[1],
            ls.options,
            doc.language_id,
            can_confirm=ls.can_confirm,
        )
        return await ls.apply(doc, edit)

    return await run_command(ls, "refine selection", work())


def snooze(ls: DllmServer, *args: Any) -> dict[str, Any]:
    """dllm.snooze [minutes]: no automatic suggestions for that long (0 wakes them up); an
    invoked request still answers. Both editors' commands come here."""
    minutes: Any = args[0] if args else None
    try:
        ls.completer.snooze.set(minutes)
    except ValueError as e:
        raise JsonRpcInvalidParams(f"Invalid Params: {e}") from None
    left = ls.completer.snooze.remaining_s()
    if left:
        ls.tell(f"automatic suggestions snoozed for {minutes:g} min", lsp.MessageType.Info)
    else:
        ls.tell("automatic suggestions are back on", lsp.MessageType.Info)
    return {"snoozed_s": left}


def status(ls: DllmServer, params: Any) -> dict[str, Any]:
    return {
        **ls.backend.status(),
        "encoding": ls.encoding,
        "typeahead_hits": ls.completer.typeahead.hits,
        "settings": describe(ls.options, nested=True),
        "documents": ls.documents.summary(),
        "snoozed_s": ls.completer.snooze.remaining_s(),
        "secrets_filtered": FILTERED.snapshot(),  # held back as credentials, by rule
        "crossfile": ls.completer.crossfile.status(),
        "drafts": {
            "shown": dict(ls.completer.sources),
            "drafted_only": ls.completer.drafted_only,  # decided with no model pass
            "workspace": ls.completer.workspace.status() if ls.completer.workspace else None,
        },
        "stats": ls.stats.summary(),
        "next_edits": ls.stats.next_edits(),  # asked; suggested, shown, accepted per kind
        "health": ls.stats.health(),
    }


def shutdown(ls: DllmServer, params: Any) -> None:
    ls.stats.flush()
    ls.stop_work()  # a reload still waiting for quiet settings never starts


def _field(params: Any, name: str) -> Any:
    """A field of a custom notification's params: a dict, or the object pygls made of it."""
    return params.get(name) if isinstance(params, dict) else getattr(params, name, None)


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
        value = ls.protocol.converter.structure(args[1], kind)
    except Exception as e:
        raise JsonRpcInvalidParams(f"Invalid Params: bad {name}: {why(e)}") from e
    return doc, value
