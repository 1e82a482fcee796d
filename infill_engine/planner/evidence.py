"""Same-file evidence of a hole's length, in tokens: the nearby lines at the cursor's indentation
(line kinds) or the sibling bodies the grammar's queries find (body kinds), and a cache of their
token counts between plans (a document being typed in keeps nearly all of them)."""

from __future__ import annotations

import inspect
import statistics
import weakref
from collections.abc import Callable
from typing import Any

from ..stop import indent_width
from .document import DocumentView
from .kinds import Encode, HoleKind

WINDOW = 20_000  # characters (bytes, for the grammar's bodies) around the cursor searched
NEARBY_LINES = 12  # lines at the cursor's indentation that make the evidence
SIBLINGS = 8  # bodies that make the evidence
RADII = (2_000, 6_000, WINDOW)  # bytes searched for them, the next only if too few were found
SAMPLE_CHARS = 1_500  # a body longer than this is measured on its head and scaled


def same_file_length(
    doc: DocumentView, kind: HoleKind, before: str, encode: Encode
) -> float | None:
    """A same-file length, in tokens, that the kind's length scales with."""
    text, offset = doc.text, doc.offset
    if kind in ("line", "expression", "statement"):
        lines = _nearby_lines(text, offset, indent_width(before) if before.strip() else None)
        if not lines:
            return None
        typical = float(statistics.median(_COUNTS.count(encode, s) for s in lines))
        if kind == "statement":
            return typical
        typed = len(encode(before.strip())) if before.strip() else 0
        return max(typical / 4, typical - typed)
    bodies = _sibling_bodies(doc, kind)
    if not bodies:
        return None
    return float(statistics.median(_measure(b, encode) for b in bodies))


def _nearby_lines(text: str, offset: int, indent: int | None) -> list[str]:
    """Up to NEARBY_LINES code lines nearest the cursor's line at its indentation (any
    indentation when the cursor's line has none yet), within WINDOW characters."""
    lo = max(0, offset - WINDOW // 2)
    hi = min(len(text), offset + WINDOW // 2)
    lo = text.rfind("\n", 0, lo) + 1 if lo else 0
    cursor_line = text.count("\n", lo, offset)
    if indent is None:
        ls = text.rfind("\n", 0, offset) + 1
        indent = indent_width(text[ls:offset])
    lines = text[lo:hi].split("\n")
    out: list[str] = []
    # outwards from the cursor's line, the line above before the one below at each distance
    for distance in range(1, max(cursor_line, len(lines) - 1 - cursor_line) + 1):
        for i in (cursor_line - distance, cursor_line + distance):
            if 0 <= i < len(lines) and lines[i].strip() and indent_width(lines[i]) == indent:
                out.append(lines[i].strip())
                if len(out) == NEARBY_LINES:
                    return out
    return out


def _sibling_bodies(doc: DocumentView, kind: HoleKind) -> list[str]:
    """The texts of up to SIBLINGS function bodies (or blocks) nearest the cursor, not the one it
    is in; within WINDOW bytes."""
    if doc.root() is None:
        return []
    query, capture = ("functions", "body") if kind != "block_body" else ("blocks", "block")
    byte = doc.byte
    found: list[tuple[int, int, int]] = []
    # The nearest are usually close: look near first, and further only while fewer than SIBLINGS
    # are found (every node within `radius` is among those found, so the nearest are the same).
    for radius in RADII:
        found = []
        # a node within `radius` of the cursor overlaps these bytes (one more each side, for a
        # node ending or starting exactly there)
        for node in doc.captures(query, capture, byte - radius - 1, byte + radius + 1):
            if node.start_byte <= byte <= node.end_byte:
                continue
            distance = min(abs(node.start_byte - byte), abs(node.end_byte - byte))
            if distance > radius:
                continue
            if kind == "block_body" and _defines(node):
                continue  # a function's or a class's body is no sibling of an if's or a loop's
            found.append((distance, node.start_byte, node.end_byte))
        if len(found) >= SIBLINGS:
            break
    found.sort()
    raw = doc.text.encode("utf-8")
    out = []
    for _, s, e in found[:SIBLINGS]:
        body = raw[s:e].decode("utf-8", "replace")
        if body.startswith("{"):
            body = body[1:-1] if body.endswith("}") else body[1:]
        if body.strip():
            out.append(body.strip("\n"))
    return out


def _defines(block: Any) -> bool:
    parent = block.parent
    return parent is not None and any(
        w in parent.type for w in ("function", "method", "class", "constructor", "impl", "struct")
    )


def _measure(body: str, encode: Encode) -> float:
    if len(body) <= SAMPLE_CHARS:
        return float(_COUNTS.count(encode, body))
    head = body[:SAMPLE_CHARS]
    return _COUNTS.count(encode, head) * len(body) / SAMPLE_CHARS


class _Counts:
    """Token counts of evidence strings (nearby lines, sibling bodies), kept between plans for
    one encode function: a document being typed in keeps nearly all of them from one request
    to the next, and tokenizing them is most of a plan's cost. The function is held weakly (a
    bound method through its object), so an engine that was replaced is not kept alive; a new
    function starts the counts afresh."""

    LIMIT = 8192  # strings remembered; SAMPLE_CHARS each at most

    def __init__(self) -> None:
        self._owner: Callable[[], Any] | None = None
        self._counts: dict[str, int] = {}

    def count(self, encode: Encode, s: str) -> int:
        if len(s) > SAMPLE_CHARS:
            return len(encode(s))
        if self._owner is None or self._owner() != encode:
            self._counts = {}
            self._owner = _weak(encode)
            if self._owner is None:
                return len(encode(s))  # cannot be held weakly: not cached
        n = self._counts.get(s)
        if n is None:
            if len(self._counts) >= self.LIMIT:
                self._counts = {}
            n = self._counts[s] = len(encode(s))
        return n

    def clear(self) -> None:
        self._owner, self._counts = None, {}


def _weak(f: Encode) -> Callable[[], Any] | None:
    try:
        return weakref.WeakMethod(f) if inspect.ismethod(f) else weakref.ref(f)
    except TypeError:
        return None


_COUNTS = _Counts()


def clear_caches() -> None:
    """Forget the remembered token counts (timing a cold plan; a new tokenizer needs no call)."""
    _COUNTS.clear()


def chars_per_token(text: str, offset: int, encode: Encode) -> float:
    sample = text[max(0, offset - 600) : offset + 200]
    n = len(encode(sample)) if sample.strip() else 0
    return max(1.0, len(sample) / n) if n else 3.5
