"""Where code is, in a text: outside string literals and line comments. The one lexer that the
span planner (where a hole sits) and the stop rules (where a construct ends) both read brackets
and comments with, so the two can never disagree on what is code.

It is deliberately small and language-agnostic, a lexer of lines: a string opens at `"`, `'` or
`` ` `` and closes at the same quote or at the end of its line (a triple-quoted or raw string
spanning lines is read as code after its first line, rare at a cursor); inside a string a
backslash escapes the next character; a line comment, given by its mark (`#`, `//`, or "" for a
language without one), runs to the end of its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

QUOTES = "\"'`"
OPENERS, CLOSERS = "([{", ")]}"
STRUCTURE = OPENERS + CLOSERS + "\n"


def code(text: str, comment: str) -> Iterator[tuple[int, str]]:
    """Each character of text that is code, with its offset. Newlines are yielded (they end
    strings and comments alike), except one escaped inside a string: it continues the string."""
    return ((i, c) for i, c in _lex(text, comment) if c)


def comment_start(line: str, comment: str) -> int | None:
    """The offset of the line comment in a line (outside strings), or None."""
    for i, c in _lex(line, comment):
        if not c:
            return i
        if c == "\n":
            break
    return None


def strip_comment(line: str, comment: str) -> str:
    """The line without its trailing comment."""
    at = comment_start(line, comment)
    return line if at is None else line[:at]


def structure(text: str, comment: str) -> Iterator[tuple[int, str]]:
    """The brackets and newlines of `code(text, comment)`, all that the scanners of depth and
    line ends read: the lexer jumps over the other characters instead of stepping through them
    (a stop rule reads its span's text after every step of the block loop)."""
    return ((i, c) for i, c in _lex(text, comment, skip=True) if c and c in STRUCTURE)


def depth(text: str, comment: str) -> int:
    """Brackets opened and not closed in the code of text (negative: more closed)."""
    d = 0
    for _, c in structure(text, comment):
        if c in OPENERS:
            d += 1
        elif c in CLOSERS:
            d -= 1
    return d


def parts(text: str, comment: str = "") -> list[tuple[int, int]]:
    """The spans of text between its top-level commas (outside brackets, strings and
    comments): `a, f(b, c), "d,e"` has three."""
    spans, start, d = [], 0, 0
    for i, c in code(text, comment):
        if c in OPENERS:
            d += 1
        elif c in CLOSERS:
            d -= 1
        elif c == "," and d == 0:
            spans.append((start, i))
            start = i + 1
    return [*spans, (start, len(text))]


def group_end(text: str, at: int, comment: str = "") -> int | None:
    """The offset just past the bracket that closes the one at text[at] (brackets in strings
    and comments left out), or None when it is not closed in text."""
    d = 0
    for i, c in structure(text[at:], comment):
        if c in OPENERS:
            d += 1
        elif c in CLOSERS:
            d -= 1
            if d == 0:
                return at + i + 1
    return None


@cache
def _plain(comment: str, quote: str) -> re.Pattern[str]:
    """A run of characters that changes nothing: in code, none of newline, quote, bracket or
    the comment mark's first character; in a string, none of newline, backslash or its quote."""
    special = "\n\\" + quote if quote else "\n" + QUOTES + OPENERS + CLOSERS + comment[:1]
    return re.compile(f"[^{re.escape(special)}]+")


def _lex(text: str, comment: str, skip: bool = False) -> Iterator[tuple[int, str]]:
    """The code characters of text as (offset, character), and each comment's start as
    (offset, ""). `skip`: only those that matter to brackets and lines (structure)."""
    quote, i, n = "", 0, len(text)
    while i < n:
        if skip and (run := _plain(comment, quote).match(text, i)) is not None:
            i = run.end()
            if i >= n:
                return
        c = text[i]
        if c == "\n":
            quote = ""
            yield i, c
        elif quote:
            if c == "\\":
                i += 1  # the escaped character is part of the string, a newline included
            elif c == quote:
                quote = ""
        elif c in QUOTES:
            quote = c
        elif comment and text.startswith(comment, i):
            yield i, ""
            nl = text.find("\n", i)
            if nl < 0:
                return
            i = nl  # > i: a comment mark holds no newline (StopRule checks it)
            continue
        else:
            yield i, c
        i += 1
