"""The next-edit handlers: `textDocument/copilotInlineEdit` and the reports about its answers.

The request is the one GitHub Copilot's language server answers, so copilot-lsp.nvim and
sidekick.nvim can ask this server too (docs/lsp.md, "Next edits"):

* params: `{textDocument: {uri, version}, position: {line, character}}`, the position in the
  negotiated encoding (UTF-16 unless the client chose another); other fields (sidekick.nvim's
  `context`) are ignored. Params of another shape get InvalidParams.
* result: `{edits: [{range, text, textDocument: {uri, version}, command}]}`, at most one edit;
  `{edits: []}` when the feature is off, the document is not open or out of sync, the version
  is not the document's (the client has moved on), or no suggestion passes the gate.
* `command`: `dllm.nextEditAccepted` with `[id]`, run by the client when the user takes the edit
  (absent with counting off, `stats.enabled: false`); `textDocument/didShowInlineEdit {item}`
  says it was shown. Both are counted per kind of suggestion (telemetry.py).
* `textDocument/didFocus {textDocument: {uri}}` (Copilot's): the document is the one in view.

The work is completion/next_edit.py's; this module reads the wire and converts coordinates
(positions.py, through the session).
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from ..completion.next_edit import NextEdits
from ..workspace.documents import point
from .session import DllmServer
from .telemetry import command_id, item_id

INLINE_EDIT = "textDocument/copilotInlineEdit"
ACCEPTED = "dllm.nextEditAccepted"
DID_SHOW = "textDocument/didShowInlineEdit"
DID_FOCUS = "textDocument/didFocus"
MAX_URI_CHARS = 8192


def parse(params: Any) -> tuple[str, int | None, lsp.Position]:
    """(uri, version or None, position) from the request's raw params; InvalidParams when they
    break the shape above."""
    doc = params.get("textDocument") if isinstance(params, dict) else None
    pos = params.get("position") if isinstance(params, dict) else None
    uri = doc.get("uri") if isinstance(doc, dict) else None
    if not isinstance(uri, str) or not 0 < len(uri) <= MAX_URI_CHARS:
        raise JsonRpcInvalidParams("Invalid Params: textDocument.uri must be a string")
    version = doc.get("version") if isinstance(doc, dict) else None
    if version is not None and type(version) is not int:
        raise JsonRpcInvalidParams("Invalid Params: textDocument.version must be an integer")
    at = point(pos)
    if at is None:
        raise JsonRpcInvalidParams("Invalid Params: position must be {line, character}")
    return uri, version, lsp.Position(line=at[0], character=at[1])


async def inline_edit(ls: DllmServer, step: NextEdits, params: Any) -> dict[str, Any]:
    """The answer to one copilotInlineEdit request, `step` finding the edit."""
    uri, version, position = parse(params)
    empty: dict[str, Any] = {"edits": []}
    if not ls.options.next_edits.enabled:
        return empty
    ls.stats.edit_asked()
    doc = ls.document(uri)
    offset = None if doc is None else ls.offset(doc, position)
    if doc is None or offset is None or version not in (None, doc.version):
        return empty
    ls.documents.viewed.saw(doc.uri, doc.text, offset)
    asked_at, text = doc.version, doc.text
    found = await step.suggest(doc, offset, ls.options, ls.documents.viewed.recent(doc.uri))
    changed = ls.document(doc.uri) is not doc or doc.version != asked_at or doc.text is not text
    if found is None or changed:
        return empty  # none, or the text changed while the sources ran
    target = doc if found.uri is None else ls.document(found.uri)
    if target is None or not found.applies_to(target.text):
        return empty  # another document, closed or changed under it
    start, end = ls.position(target.text, found.start), ls.position(target.text, found.end)
    edit: dict[str, Any] = {
        "range": {
            "start": {"line": start.line, "character": start.character},
            "end": {"line": end.line, "character": end.character},
        },
        "text": found.text,
        "textDocument": {"uri": target.uri, "version": target.version},
    }
    key = ls.stats.issue_edit(found.kind)
    if key is not None:
        edit["command"] = {"title": "dLLM: next edit", "command": ACCEPTED, "arguments": [key]}
    return {"edits": [edit]}


def accepted(ls: DllmServer, *args: Any) -> None:
    ls.stats.accepted(command_id(args[0] if args else None))


def did_show(ls: DllmServer, params: Any) -> None:
    ls.stats.shown(item_id(params.get("item") if isinstance(params, dict) else None))


def did_focus(ls: DllmServer, params: Any) -> None:
    ident = params.get("textDocument") if isinstance(params, dict) else None
    uri = ident.get("uri") if isinstance(ident, dict) else None
    doc = ls.document(uri) if isinstance(uri, str) else None
    if doc is not None:
        ls.documents.viewed.saw(doc.uri, doc.text, None)


def register(server: DllmServer, step: NextEdits | None = None) -> NextEdits:
    """Register the request (answered by `step`, by default NextEdits()), the command and the
    notifications on `server`; the step is returned, for its sources to be added to."""
    step = step or NextEdits()

    async def answer(ls: DllmServer, params: Any) -> dict[str, Any]:
        return await inline_edit(ls, step, params)

    server.feature(INLINE_EDIT)(answer)
    server.command(ACCEPTED)(accepted)
    server.feature(DID_SHOW)(did_show)
    server.feature(DID_FOCUS)(did_focus)
    return step
