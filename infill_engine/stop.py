"""Where a construct ends, read from the text of a span as the model commits it.

A `StopRule` comes with a span plan (planner.py): the rest of a line ends at its newline, an
argument list at the bracket that closes it, an indented block at the first line indented less
than its body, a braced block at its closing brace. The engine applies the rule to the committed
head of the span after every step (runner.py): once the construct has ended, the span is done
("syntax" stop), and while it is still open a full span may grow.

Brackets are counted outside string literals and comments, line by line: a rule that reads
`print(")")` as a closing bracket would cut the line short.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

StopKind = Literal["line", "expression", "indent", "brace", "none"]
OPENERS, CLOSERS = "([{", ")]}"


@dataclass(frozen=True)
class StopRule:
    kind: StopKind = "none"
    indent: int = 0  # "indent": the body's indentation, in columns (tabs count 8)
    comment: str = "#"  # the language's line comment, which hides brackets

    def cut(self, text: str) -> int | None:
        """Where the construct ends in text (an offset; the text before it is kept), or None
        while it is still open."""
        if self.kind == "none":
            return None
        if self.kind == "indent":
            return _dedent(text, self.indent)
        return _scan(text, self.kind, self.comment)


def _scan(text: str, kind: StopKind, comment: str) -> int | None:
    depth, quote, i = 0, "", 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote or c == "\n":
                quote = ""
        elif c in "\"'`":
            quote = c
        elif text.startswith(comment, i):
            nl = text.find("\n", i)
            if nl < 0:
                return None
            i = nl
            continue
        elif c in OPENERS:
            depth += 1
        elif c in CLOSERS:
            depth -= 1
            if depth < 0 and kind in ("expression", "brace"):
                return len(text[:i].rstrip()) if kind == "brace" else i
        if c == "\n" and depth <= 0 and kind == "line":
            return i
        i += 1
    return None


def _dedent(text: str, indent: int) -> int | None:
    """The end of the last non-blank line before the first complete line indented less than
    `indent`; a line counts once it has a character that is not whitespace."""
    start = text.find("\n")
    while start >= 0:
        nl = text.find("\n", start + 1)
        line = text[start + 1 : nl if nl >= 0 else len(text)]
        body = line.lstrip(" \t")
        if body and indent_width(line) < indent:
            return len(text[:start].rstrip())
        start = nl
    return None


def indent_width(line: str) -> int:
    return len(line[: len(line) - len(line.lstrip(" \t"))].expandtabs(8))
