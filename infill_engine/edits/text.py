"""What the structure rules read text by: tokens (names, numbers, strings and single marks, with
their str spans), a line's shape (its tokens with names, numbers and strings abstracted; keywords
stay themselves: `return x` and `yield x` differ), the token changes of an edit, and lines."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from ..drafts.idents import KEYWORDS  # not names: a rename never maps them, a shape keeps them
from .history import Edit

_TOKEN = re.compile(
    r"[A-Za-z_$][\w$]*|\d[\w.]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|`[^`\n]*`|\S"
)
_NAME = re.compile(r"[A-Za-z_$][\w$]*\Z")


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int


def tokens(line: str) -> list[Token]:
    return [Token(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(line)]


def is_name(text: str) -> bool:
    return bool(_NAME.match(text)) and text not in KEYWORDS


def _kind(text: str) -> str:
    if is_name(text):
        return "N"
    if text[0].isdigit():
        return "0"
    if text[0] in "\"'`" and len(text) > 1:
        return "S"
    return text


def shape(toks: Sequence[Token]) -> tuple[str, ...]:
    return tuple(_kind(t.text) for t in toks)


def opcodes(a: Sequence[Token], b: Sequence[Token]) -> list[tuple[str, int, int, int, int]]:
    return list(
        SequenceMatcher(
            None, [t.text for t in a], [t.text for t in b], autojunk=False
        ).get_opcodes()
    )


def changes(edit: Edit) -> list[tuple[str, int, int, int, int]]:
    return [
        op
        for op in opcodes(tokens(edit.lines_before), tokens(edit.lines_after))
        if op[0] != "equal"
    ]


def words(text: str, name: str, lo: int, hi: int) -> Iterator[re.Match[str]]:
    return re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])").finditer(text, lo, hi)


def heading(last: Edit, earlier: Sequence[Edit]) -> int:
    """Which way a run of edits goes: 1 down the file, -1 up it, 0 not known (no earlier edit
    off the last one's lines). People carry a change through a file in one sweep, so what lies
    behind the run was likely passed over: the rules try the places ahead of it first."""
    first, end = last.start - len(last.head), last.end + len(last.tail)
    for e in reversed(earlier):
        if e.start < first:
            return 1
        if e.start > end:
            return -1
    return 0


def behind(way: int, at: int, offset: int) -> bool:
    """offset lies behind `at` for a run of edits heading `way`."""
    return way * (offset - at) < 0


NEAREST = 256  # the occurrences a rule reads lines of: a name used all over a large file
# (a global renamed in 14,000 lines of C that use it 4,000 times) cost the rules 149 ms before


def ordered(found: Sequence[re.Match[str]], way: int, at: int) -> list[re.Match[str]]:
    """The NEAREST of `found` to `at`, those ahead of a run heading `way` first, each side by
    distance: the order the rules try places in, and the only ones they read."""
    return sorted(found, key=lambda m: (behind(way, at, m.start()), abs(m.start() - at)))[:NEAREST]


def neighbours(text: str, start: int, end: int) -> tuple[str, ...]:
    """The two tokens before text[start:end] on its line and the two after it ("" past the
    line's ends)."""
    a, b = line_of(text, start)[0], line_of(text, end)[1]
    left = [t.text for t in tokens(text[a:start])][-2:]
    right = [t.text for t in tokens(text[end:b])][:2]
    return ("",) * (2 - len(left)) + (*left, *right) + ("",) * (2 - len(right))


# `a.b`, `a?.b`, `a::b` (spaces allowed: a call chain over lines), `p->b` (none: `) -> T` is
# a return type)
_RECEIVER = re.compile(r"([\w$]*)\s*(?:(?:\.|::|\?\.)\s*|->)$")


def receiver(text: str, offset: int) -> str | None:
    """What the name at offset is a member of (`valve` in `valve.Close`; "" where that is no
    plain name, as in `f().Close`); None where it is no member."""
    found = _RECEIVER.search(text, max(0, offset - 64), offset)
    return None if found is None else found.group(1)


def kin(text: str, start: int, end: int, around: Sequence[str]) -> int:
    """How many of the tokens next to text[start:end] are those `around` another occurrence
    (neighbours): the same neighbours, the same construct."""
    return sum(x == y != "" for x, y in zip(neighbours(text, start, end), around, strict=True))


def line_of(text: str, offset: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return start, len(text) if end < 0 else end


def lines_of(text: str, edit: Edit) -> tuple[int, int]:
    """Where the whole lines that `edit` wrote start and end in `text` (the text after it)."""
    return line_of(text, edit.start)[0], line_of(text, edit.end)[1]


def lines_near(text: str, at: int, n: int) -> Iterator[tuple[int, int]]:
    """The spans of up to n lines before and n after the line starting at `at`, nearest first
    is not promised (the caller sorts)."""
    lo = at
    for _ in range(n):
        if lo == 0:
            break
        lo = text.rfind("\n", 0, lo - 1) + 1
    end = text.find("\n", at)
    hi = end
    for _ in range(n):
        if hi < 0:
            break
        hi = text.find("\n", hi + 1)
    hi = len(text) if hi < 0 else hi
    pos = lo
    while pos <= hi:
        e = text.find("\n", pos)
        e = len(text) if e < 0 else e
        if pos != at:
            yield pos, e
        if e >= len(text):
            break
        pos = e + 1


_LINE_COMMENT = re.compile(r"\s*(#|//|/\*|\*|--)")


def in_comment(text: str, offset: int, tree: Any | None) -> bool:
    """Whether offset is in a comment: the tree says, else a line that opens with a comment
    mark."""
    return in_comments(text, [offset], tree)[0]


def in_comments(text: str, offsets: Sequence[int], tree: Any | None) -> list[bool]:
    """`in_comment` for each of offsets, the text read once to find their bytes (not once per
    offset: a name can have hundreds of references in a large file)."""
    if tree is None:
        return [bool(_LINE_COMMENT.match(text, text.rfind("\n", 0, o) + 1)) for o in offsets]
    found: dict[int, bool] = {}
    at = byte = 0
    for o in sorted(set(offsets)):
        byte += len(text[at:o].encode("utf-8"))
        at = o
        node = tree.root_node.descendant_for_byte_range(byte, byte)
        found[o] = node is not None and "comment" in node.type
    return [found[o] for o in offsets]
