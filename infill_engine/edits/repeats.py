"""The repeat rule: the last edit's replacement, grown to whole words, made again at another
occurrence of its old text.

About a fifth of the edits that another follows are followed by the same replacement elsewhere
(docs/next_edits.md, "What the next hunks repeat"): a string or a comment changed again, a
qualified name, an expression wrapped, a name whose new form was in use already. Most
occurrences of an old text are meant to stay, so the score reads what makes a repeat likely:
an occurrence on a line of the edited line's shape (a series), the same replacement made before
in this history, a long old text, few occurrences left, and nearness. An occurrence in a comment
counts only after an edit in a comment, and one in code only after an edit in code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .history import Edit
from .suggestion import Suggestion
from .text import (
    heading,
    in_comment,
    in_comments,
    is_name,
    kin,
    line_of,
    lines_of,
    neighbours,
    ordered,
    shape,
    tokens,
)

MAX_SCAN_CHARS = 400_000  # occurrences are looked for within this of the edit
MAX_LOOKS = 8  # the nearest occurrences whose kind of text (comment or code) is read
_WORD = re.compile(r"[\w$]")


def grown(edit: Edit) -> tuple[str, str] | None:
    """(old, new): the edit's replacement grown to whole words on its line; None for an edit
    over lines, a pure deletion or insertion of blank text, or a change of marks alone."""
    span = _grown_span(edit)
    return None if span is None else (edit.lines_before[span[0] : span[1]], span[2])


def _grown_span(edit: Edit) -> tuple[int, int, str] | None:
    """`grown`'s old text as a span of the edit's lines before, and its new text."""
    before, after = edit.lines_before, edit.lines_after
    a, b_old, b_new = len(edit.head), len(edit.head) + len(edit.old), len(edit.head) + len(edit.new)
    while a > 0 and _WORD.match(before[a - 1]) and _WORD.match(before[a] if a < b_old else "_"):
        a -= 1
    while b_old < len(before) and _WORD.match(before[b_old]) and _WORD.match(before[b_old - 1]):
        b_old, b_new = b_old + 1, b_new + 1
    old, new = before[a:b_old], after[a:b_new]
    if "\n" in old or "\n" in new or not old.strip() or old == new:
        return None
    if not any(c.isalnum() for c in old) or len(old.strip()) < 2:
        return None
    return a, b_old, new


def repeated(text: str, last: Edit, earlier: Sequence[Edit], tree: Any | None) -> list[Suggestion]:
    span = _grown_span(last)
    if span is None:
        return []
    old, new = change = last.lines_before[span[0] : span[1]], span[2]
    lead = r"(?<![\w$])" if _WORD.match(old[0]) else ""
    trail = r"(?![\w$])" if _WORD.match(old[-1]) else ""
    pattern = re.compile(lead + re.escape(old) + trail)
    edited = lines_of(text, last)
    lo, hi = max(0, last.start - MAX_SCAN_CHARS), last.start + MAX_SCAN_CHARS
    every = [
        m
        for m in pattern.finditer(text, lo, hi)
        if not edited[0] <= m.start() < edited[1] and not _done(text, m.start(), old, new)
    ]
    if not every:
        return []
    found = ordered(every, heading(last, earlier), last.start)
    form = shape(tokens(last.lines_before))
    series = [m for m in found if shape(tokens(text[slice(*line_of(text, m.start()))])) == form]
    prose = in_comment(text, last.start, tree)
    nearest = (series or found)[:MAX_LOOKS]
    kinds = in_comments(text, [m.start() for m in nearest], tree)
    alike = [m for m, k in zip(nearest, kinds, strict=True) if k == prose]
    if not alike:
        return []
    # Of the nearest one's line, the occurrence whose neighbours are the edit's (the same
    # construct: a line can hold the old text twice, in different roles).
    first = line_of(text, alike[0].start())
    around = neighbours(last.lines_before, span[0], span[1])
    on_line = sorted(
        (x for x in alike if first[0] <= x.start() <= first[1]),
        key=lambda x: abs(x.start() - last.start),
    )
    m = max(on_line, key=lambda x: kin(text, x.start(), x.end(), around))
    again = any(grown(e) == change for e in earlier)
    far = text.count("\n", min(m.start(), last.start), max(m.start(), last.start))
    # An edit of more than one name, or one that wrote a name in use already, made its place
    # like others (a statement rewritten, a copy corrected): alone, rarely a series.
    settled = len(tokens(old)) > 1 or (is_name(new) and _in_use(text, new, edited))
    score = 0.3 + 0.3 * bool(series) + 0.3 * again + 0.1 * (len(old) >= 6)
    score -= 0.15 * (settled and not (series or again))
    score += 0.1 * (len(every) == 1) - 0.1 * (len(every) > 6) - 0.1 * min(max(far - 20, 0) / 200, 1)
    return [Suggestion(m.start(), m.end(), new, "replace", round(min(max(score, 0.0), 0.95), 4))]


def _done(text: str, at: int, old: str, new: str) -> bool:
    """Whether the old text at `at` stands inside the new text already (`a == b` made
    `a.resolve() == b.resolve()`: the old text is in the new one, and a line that reads so
    has been changed)."""
    k = new.find(old)
    return 0 <= k <= at and text.startswith(new, at - k)


def _in_use(text: str, name: str, edited: tuple[int, int]) -> bool:
    pattern = re.compile(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])")
    return any(not edited[0] <= m.start() < edited[1] for m in pattern.finditer(text))
