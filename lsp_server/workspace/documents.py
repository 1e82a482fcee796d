"""The open documents: their text, version and language, and the LSP rules that change them.

This module, not pygls's workspace, applies didOpen / didChange / didClose, because the rules
must be exact for the server to see what the editor shows:

* Ranges are read by positions.py: lines end at "\\n", "\\r\\n" or "\\r" only; a character past
  the end of a line means the line's end; a line past the last line means the end of the
  document; a position inside a multi-unit character (half a utf-16 surrogate pair, part of a
  utf-8 sequence) means that character's start.
* A reversed range (end before start) is the same range with its ends swapped, as
  vscode-languageserver-textdocument reads it.
* A lone surrogate (legal in JSON, not encodable as utf-8, refused by tokenizers) becomes U+FFFD:
  one code point and one utf-16 unit like it, and three utf-8 bytes as surrogatepass counts it,
  so every position stays where the editor has it.
* A change that breaks the schema ends its notification: the changes before it stay applied,
  the document is marked out of sync (nothing is served from it) and later incremental changes
  are skipped, until a full-text change or a didOpen brings it back.

Each applied change is also told to the document's edit history (infill_engine.edits.History,
the next edits' input) as what it really changed: the text it replaced and the text it put there
less their common ends, so a client that sends whole lines or the whole text records the same
edits as one that sends each keystroke. A change of more than MAX_DIFF_CHARS on either side, and
a document going out of sync, clear the history instead. Opening a document also records it as
viewed (viewed.py).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from infill_engine.edits.history import History, replacement

from . import memory, positions
from .trees import IncrementalTree
from .viewed import Viewed

Outcome = Literal["applied", "out of sync", "ignored", "unknown"]
MAX_UINT = 2**31 - 1  # LSP's uinteger
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_DIFF_CHARS = 200_000  # a change larger on either side is not read for its edit


def clean(text: str) -> str:
    """text with every lone surrogate replaced by U+FFFD; positions are unchanged."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


@dataclass(frozen=True)
class Change:
    text: str
    range: tuple[int, int, int, int] | None  # start line, char, end line, char; None: all


@dataclass
class Document:
    uri: str
    language_id: str
    version: int
    text: str
    in_sync: bool = True
    tree: IncrementalTree = field(init=False)
    history: History = field(init=False, default_factory=History)  # its recent edits

    def __post_init__(self) -> None:
        self.tree = IncrementalTree(self.language_id)

    def syntax_tree(self) -> Any | None:
        """The tree of the current text, reparsed incrementally; None without a grammar. A
        copy (a tree-sitter copy shares its nodes and costs nothing): the document's own is
        edited in place by the next didChange, while a request may still read this one on a
        thread of its own."""
        tree = self.tree.current(self.text)
        return tree.copy() if tree is not None else None


def _uint(v: Any) -> bool:
    return type(v) is int and 0 <= v <= MAX_UINT  # bool is an int to Python, not to JSON


def point(raw: Any) -> tuple[int, int] | None:
    """(line, character) from a raw LSP Position, or None when it breaks the schema."""
    if not isinstance(raw, dict) or not (_uint(raw.get("line")) and _uint(raw.get("character"))):
        return None
    return raw["line"], raw["character"]


def parse_change(raw: Any) -> Change | None:
    """A TextDocumentContentChangeEvent, or None when raw breaks its schema."""
    if not isinstance(raw, dict) or not isinstance(raw.get("text"), str):
        return None
    if "range" not in raw:
        return Change(clean(raw["text"]), None)
    r = raw["range"]
    start = point(r.get("start")) if isinstance(r, dict) else None
    end = point(r.get("end")) if isinstance(r, dict) else None
    if start is None or end is None:
        return None
    return Change(clean(raw["text"]), (*start, *end))


def change_span(text: str, change: Change, encoding: str) -> tuple[int, int]:
    """The str offsets [start, end) of text that the change replaces."""
    if change.range is None:
        return 0, len(text)
    a, b, c, d = change.range
    start = positions.offset_clamped(text, a, b, encoding)
    end = positions.offset_clamped(text, c, d, encoding)
    return min(start, end), max(start, end)


def record(history: History, text: str, start: int, end: int, inserted: str) -> None:
    """Tell `history` that text[start:end] became `inserted`, less the ends the two share."""
    if end - start > MAX_DIFF_CHARS or len(inserted) > MAX_DIFF_CHARS:
        history.clear()  # a paste or a reload of that size is no edit to follow
        return
    change = replacement(text[start:end], inserted)
    if change is not None:
        a, b, new = change
        history.record(text, start + a, start + b, new)


class Documents:
    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}
        self.viewed = Viewed()  # excerpts of the documents seen last, for next edits' prompts

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def open(self, uri: str, language_id: str, version: int, text: str) -> Document:
        doc = self._docs[uri] = Document(uri, language_id, version, clean(text))
        self.viewed.saw(uri, doc.text, 0)
        return doc

    def close(self, uri: str) -> None:
        """Forget the document; the memory its size cost goes back (memory.py)."""
        doc = self._docs.pop(uri, None)
        if doc is not None:
            chars = len(doc.text)
            del doc  # its text and tree go before the collection
            memory.release(chars)

    def change(self, params: Any, encoding: str) -> Outcome:
        """Apply a didChange's raw params. "out of sync" is returned once, when a bad change
        first puts the document out of sync; "ignored" when it was out of sync already (or a
        bad notification found it so); "unknown" when no open document is named."""
        ident = params.get("textDocument") if isinstance(params, dict) else None
        uri = ident.get("uri") if isinstance(ident, dict) else None
        doc = self._docs.get(uri) if isinstance(uri, str) else None
        if doc is None or not isinstance(ident, dict):
            return "unknown"
        raws = params.get("contentChanges")
        version = ident.get("version")
        changes = raws if isinstance(raws, list) and type(version) is int else [None]
        was_in_sync = doc.in_sync
        for raw in changes:
            change = parse_change(raw)
            if change is None:
                doc.in_sync = False
                doc.history.clear()
                break
            resync = change.range is None and not doc.in_sync
            if resync:
                doc.in_sync = True
                doc.tree.reset()
            if doc.in_sync:
                start, end = change_span(doc.text, change, encoding)
                inserted = change.text
                if change.range is None and not resync:
                    # The editor's whole text, ours in sync: read as the span it changed, so
                    # the tree reparses that alone and the history records it, however large
                    # the document (a client that sends whole texts, on every keystroke).
                    start, end, inserted = replacement(doc.text, change.text) or (0, 0, "")
                if start == end and not inserted and not resync:
                    continue
                doc.tree.edit(doc.text, start, end, inserted)
                if resync:  # the text before it was not the editor's: no edit to read
                    doc.history.clear()
                else:
                    record(doc.history, doc.text, start, end, inserted)
                doc.text = doc.text[:start] + inserted + doc.text[end:]
        if type(version) is int:
            doc.version = version
        if doc.in_sync:
            return "applied"
        return "out of sync" if was_in_sync else "ignored"

    def summary(self) -> list[dict[str, Any]]:
        """Each open document in brief, for dllm/status: a client can compare the digest."""
        return [
            {
                "uri": d.uri,
                "version": d.version,
                "inSync": d.in_sync,
                "sha256": hashlib.sha256(d.text.encode("utf-8")).hexdigest(),
            }
            for d in self._docs.values()
        ]
