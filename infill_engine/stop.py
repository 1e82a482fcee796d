"""Where a construct ends, read from the text of a span as the model commits it.

A `StopRule` comes with a span plan (planner.py): the rest of a line ends at its newline, an
argument list at the bracket that closes it, an indented block at the first line indented less
than its body, a braced block at its closing brace. A statement is a line, unless that line opens
an indented block (`opener`, Python's `:`): then it ends with the block. A statement inserted
before existing code (`newline`) keeps its newline, so the code after it stays on its own line.
The engine applies the rule to the committed
head of the span after every step (runner.py): once the construct has ended, the span is done
("syntax" stop), and while it is still open a full span may grow.

A repetition loop (repeat.py: `path.path.path.path.path.`) ends the construct too: its end will
never come, and a span that ran on would only grow the loop to `max_span`. The rule cuts at the
loop's end, so the engine's text keeps the loop (what the model wrote; the finishing steps cut it
out), and the row stops with "syntax" too: the text decided the end, not an end token or the
budget. A rule of kind "none" (a span that is only a budget) has no construct and no such stop.

Brackets are counted outside string literals and comments (lexer.py, shared with the planner):
a rule that reads `print(")")` as a closing bracket would cut the line short.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from . import lexer, repeat
from .lexer import CLOSERS, OPENERS

StopKind = Literal["line", "expression", "indent", "brace", "none"]
STOP_KINDS: tuple[str, ...] = get_args(StopKind)
MAX_INDENT = 4096  # columns: deeper than any real code
MAX_MARK = 8  # characters of a comment or opener mark


@dataclass(frozen=True)
class StopRule:
    kind: StopKind = "none"
    indent: int = 0  # "indent": the body's indentation, in columns (tabs count 8)
    comment: str = "#"  # the language's line comment, which hides brackets ("": none)
    opener: str = ""  # "line": a line whose code ends with it goes on with its indented block
    newline: bool = False  # "line": the newline that ends the line is kept
    statement: bool = False  # "line": blank lines before the statement's code belong to it

    def __post_init__(self) -> None:
        # A rule may come off the wire (the engine service): every field is checked here, so
        # no rule that is built can make the scanners below misbehave.
        if self.kind not in STOP_KINDS:
            raise ValueError(f"stop kind must be one of {list(STOP_KINDS)}, got {self.kind!r}")
        if type(self.indent) is not int or not 0 <= self.indent <= MAX_INDENT:
            raise ValueError(f"stop indent must be an int in [0, {MAX_INDENT}]")
        for name in ("comment", "opener"):
            mark = getattr(self, name)
            # whitespace in a mark would match at a newline and stall the line scan
            if not isinstance(mark, str) or len(mark) > MAX_MARK or mark != "".join(mark.split()):
                raise ValueError(
                    f"stop {name} must be a string of at most {MAX_MARK} characters with no "
                    f"whitespace, got {mark!r}"[:200]
                )
        if type(self.newline) is not bool or type(self.statement) is not bool:
            raise ValueError("stop newline and statement must be booleans")

    def cut(self, text: str) -> int | None:
        """Where the construct ends in text (an offset; the text before it is kept), or None
        while it is still open; a repetition loop in it ends it where the loop ends."""
        if self.kind == "none":
            return None
        end = self._construct_end(text)
        loop = repeat.find_loop(text if end is None else text[:end])
        return end if loop is None else loop.end

    def _construct_end(self, text: str) -> int | None:
        if self.kind == "indent":
            return _dedent(text, self.indent)
        if self.kind != "line":
            return _scan(text, self.kind, self.comment)
        skip = 0
        if self.statement:
            if not text.strip():
                return None  # no code yet: the statement has not started
            skip = text.rfind("\n", 0, len(text) - len(text.lstrip())) + 1
        end = self._line_end(text[skip:])
        return None if end is None else skip + end

    def close(self, text: str) -> str:
        """A finished fill as its construct ends: a statement inserted before existing code
        (`newline`) ends with its newline even when the model ended it with an end token, and
        one with no code in it is no statement at all."""
        if self.kind != "line" or not self.newline:
            return text
        if not text.strip():
            return ""
        return text if text.endswith("\n") else text + "\n"

    def _line_end(self, text: str) -> int | None:
        end = _scan(text, "line", self.comment)
        if end is None:
            return None
        line_start = text.rfind("\n", 0, end) + 1
        code = lexer.strip_comment(text[line_start:end], self.comment).rstrip()
        if self.opener and code.endswith(self.opener):
            block = _dedent(text[line_start:], indent_width(text[line_start:end]) + 1)
            if block is None:
                return None  # the block is still being written
            end = line_start + block
        return end + 1 if self.newline else end


def _scan(text: str, kind: StopKind, comment: str) -> int | None:
    depth = 0
    for i, c in lexer.structure(text, comment):
        if c in OPENERS:
            depth += 1
        elif c in CLOSERS:
            depth -= 1
            if depth < 0 and kind in ("expression", "brace"):
                return len(text[:i].rstrip()) if kind == "brace" else i
        elif c == "\n" and depth <= 0 and kind == "line":
            return i
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
