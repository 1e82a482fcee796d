"""The part of a document that goes to the engine service with a request.

The service plans the span and cuts the context itself (`v2/infill`), so it needs the text
around the hole, not the whole document: a frame holds at most 1 MiB and a document may be
larger. Each side of the hole gets

    max(budget * CHARS_PER_TOKEN_BOUND, SIDE_MIN) characters,

the budget being `context.prefixTokens` before the hole and `context.suffixTokens` after it.
The first term is as far as the service's context cut ever looks (context.py: 8 characters per
token bound any budget), the second covers the planner's evidence (nearby lines within
planner.WINDOW / 2 characters of the cursor, sibling bodies within WINDOW bytes: SIDE_MIN is
twice WINDOW, so that a body near that edge is sent whole). So the service plans and cuts from
the window exactly what it would from the whole document.

The window starts at a line start and ends after a line end. Where the document has a grammar
it never starts or ends inside a string or a comment: the service parses the window on its
own, and a window opening inside a docstring would turn every string after it inside out. A
window over `max_bytes` of UTF-8 shrinks, both sides in proportion, until it fits.
"""

from __future__ import annotations

from typing import Any

import grammars
from infill_engine.context import CHARS_PER_TOKEN_BOUND
from infill_engine.planner import WINDOW

from ..workspace.positions import byte_offset, offset_from_byte

SIDE_MIN = 2 * WINDOW  # characters either side, whatever the budgets
MAX_BYTES = 960 * 1024  # a frame's 1 MiB, less room for the request's other fields
_OPAQUE = ("string", "comment")  # node types a cut must not fall inside (by name, any grammar)
_MAX_MOVES = 16  # a cut moved out of this many strings in a row stays where it is


def window(
    text: str,
    offset: int,
    after: int,
    prefix_tokens: int,
    suffix_tokens: int,
    language_id: str,
    tree: Any | None = None,
    max_bytes: int = MAX_BYTES,
) -> tuple[int, int]:
    """[lo, hi) of `text` to send for the hole [offset, after) (after == offset: a cursor).
    `tree` is the document's tree of `text` when the caller keeps one; without it, a document
    longer than its window is parsed here (with its grammar, if it has one)."""
    before = max(prefix_tokens * CHARS_PER_TOKEN_BOUND, SIDE_MIN)
    behind = max(suffix_tokens * CHARS_PER_TOKEN_BOUND, SIDE_MIN)
    while True:
        lo, hi = _line_start(text, offset - before), _line_end(text, after + behind)
        if (lo, hi) != (0, len(text)):
            tree = tree if tree is not None else _parse(text, language_id)
            if tree is not None:
                lo, hi = _outside(text, lo, tree, -1), _outside(text, hi, tree, 1)
        size = len(text[lo:hi].encode("utf-8", "surrogatepass"))
        if size <= max_bytes or before + behind == 0:
            return lo, hi
        scale = max_bytes / size * 0.9
        before, behind = int(before * scale), int(behind * scale)


def _line_start(text: str, at: int) -> int:
    return 0 if at <= 0 else text.rfind("\n", 0, at) + 1


def _line_end(text: str, at: int) -> int:
    if at >= len(text):
        return len(text)
    nl = text.find("\n", at)
    return len(text) if nl < 0 else nl + 1


def _parse(text: str, language_id: str) -> Any | None:
    parser = grammars.parser(language_id)
    return None if parser is None else parser.parse(text.encode("utf-8", "surrogatepass"))


def _outside(text: str, at: int, tree: Any, direction: int) -> int:
    """`at` moved out of any string or comment that holds it: to the line start before it
    (direction -1) or the line end after it (+1)."""
    for _ in range(_MAX_MOVES):
        if at <= 0 or at >= len(text):
            return at
        b = byte_offset(text, at)
        node = tree.root_node.descendant_for_byte_range(b, b)
        holder = None
        while node is not None:
            if node.start_byte < b < node.end_byte and any(k in node.type for k in _OPAQUE):
                holder = node  # the outermost one wins: keep climbing
            node = node.parent
        if holder is None:
            return at
        if direction < 0:
            at = _line_start(text, offset_from_byte(text, holder.start_byte))
        else:
            at = _line_end(text, offset_from_byte(text, holder.end_byte))
    return at
