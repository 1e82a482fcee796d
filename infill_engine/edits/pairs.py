"""The pair rule: a line removed that opened or closed a preprocessor conditional leaves its
other half alone, and that line goes too.

C and C++ wrap code in `#if`/`#ifdef`/`#ifndef` ... `#endif`. When a condition is dropped, its
`#if` line and its `#endif` line go, and people remove them one at a time: `#ifdef
USE_CURL_ASYNC` went, and `#endif /* USE_CURL_ASYNC */` went next. The rule proposes the other
half only where the edit removed lines (rewritten ones were moved or replaced, as a header guard
made `#pragma once`), where the removal left the document's conditionals unbalanced, and where
the conditional had no `#else` or `#elif` at its own level (dropping a condition with an else
branch keeps one branch, which is no one-line edit). On the calibration histories (both replay
orders, docs/next_edits.md) it proposed something at 33 asks that an edit followed, and was
right at 27 (C 21 of 24, C++ 6 of 9).
"""

from __future__ import annotations

import re

from .history import Edit
from .suggestion import Suggestion
from .text import line_of, lines_of

# The languageIds whose files run through the C preprocessor.
PREPROCESSED = frozenset({"c", "cpp", "objective-c", "objective-cpp", "cuda-cpp"})
MAX_SCAN_CHARS = 400_000  # the other half is looked for within this of the edit
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(ifdef|ifndef|if|elif|else|endif)\b", re.MULTILINE)
OPENS = frozenset({"if", "ifdef", "ifndef"})
ENDS = frozenset({"endif"})
BRANCHES = frozenset({"else", "elif"})


def paired(text: str, last: Edit, language_id: str) -> list[Suggestion]:
    """A conditional's opening or closing line removed: its other half, removed too."""
    if language_id not in PREPROCESSED or last.new.strip():
        return []  # no preprocessor, or the lines were rewritten rather than removed
    before, after = _kinds(last.lines_before), _kinds(last.lines_after)
    opened = _count(before, OPENS) - _count(after, OPENS)
    closed = _count(before, ENDS) - _count(after, ENDS)
    branches = _count(before, BRANCHES) - _count(after, BRANCHES)
    if (opened, closed) not in ((1, 0), (0, 1)) or branches:
        return []  # not one half removed, or the conditional's branches rewritten
    lo, hi = max(0, last.start - MAX_SCAN_CHARS), min(len(text), last.end + MAX_SCAN_CHARS)
    window = [(m.start(), m.group(1)) for m in _DIRECTIVE.finditer(text, lo, hi)]
    kinds = [k for _, k in window]
    if _count(kinds, OPENS) == _count(kinds, ENDS):
        return []  # balanced as it stands: the removal mended something, or this is not all
    first, last_line = lines_of(text, last)
    if opened:  # the first #endif below that closes nothing opened below the edit
        other = _unpaired([d for d in window if d[0] > last_line], ENDS, OPENS)
    else:  # the first #if above that nothing below it closes before the edit
        other = _unpaired([d for d in reversed(window) if d[0] < first], OPENS, ENDS)
    if other is None:
        return []
    a, b = line_of(text, other)
    while text.endswith("\\", a, b) and b < len(text):  # a directive continued on the next line
        b = line_of(text, b + 1)[1]
    b = min(len(text), b + 1)  # the lines and the newline
    if a >= 2 and text[a - 2] == "\n" and (b == len(text) or text.startswith("\n", b)):
        a -= 1  # blank lines on both sides (or a blank line and the end): one blank line goes too
    return [Suggestion(a, b, "", "pair", 0.8)]


def _kinds(lines: str) -> list[str]:
    return [m.group(1) for m in _DIRECTIVE.finditer(lines)]


def _count(kinds: list[str], of: frozenset[str]) -> int:
    return sum(k in of for k in kinds)


def _unpaired(
    directives: list[tuple[int, str]], wanted: frozenset[str], nested: frozenset[str]
) -> int | None:
    """Walking `directives` away from the edit, the first of kind `wanted` at depth 0 (a
    `nested` kind goes one deeper, a `wanted` one comes back up); None where an #else or #elif
    of the same level comes first."""
    depth = 0
    for at, kind in directives:
        if kind in nested:
            depth += 1
        elif kind in wanted:
            if depth == 0:
                return at
            depth -= 1
        elif depth == 0:  # else, elif: the conditional had another branch
            return None
    return None
