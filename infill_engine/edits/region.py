"""The model tier's text: the editable region around a cursor (or around a candidate's span) and
the prompt around it, cut to what the model can see.

- `region`: whole lines, a few above the cursor's line and a few more below (a next edit is more
  often further down), bounded in characters.
- `history_block`: the document's recent edits as comment lines in the language's comment
  syntax, each edit's touched lines as they were (`-`) and as they are (`+`), newest last.
- `prompt`: those edits, then the text before the region, and the text after it, cut at line
  starts to the engine's context budgets (request.budgets) beside the region's furthest reach;
  the edits are kept whole at the top (the oldest dropped first), within a share of the
  positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grammars

from ..request import PREFIX_TOKENS, SUFFIX_TOKENS, budgets
from .history import Edit

if TYPE_CHECKING:
    from ..engine import Engine

LINES_BEFORE = 2  # whole lines of the region above the cursor's line
LINES_AFTER = 4  # and below it
MAX_REGION_CHARS = 1200
PROMPT_EDITS = 6  # the newest edits the prompt shows
EDIT_LINES = 4  # of each side of one edit
EDIT_LINE_CHARS = 160
HISTORY_SHARE = 4  # the edits take at most 1/4 of the model's positions
MARGIN = 8  # tokens kept free: text encoded whole may take a few more than its parts
# text is first cut to budget × this many characters (a token longer only costs context)
CHARS_PER_TOKEN = 8


def region(
    text: str,
    cursor: int,
    end: int | None = None,
    before: int = LINES_BEFORE,
    after: int = LINES_AFTER,
    max_chars: int = MAX_REGION_CHARS,
) -> tuple[int, int]:
    """The editable region [start, end): from the start of the line `before` lines above the
    cursor's to the end of the line `after` lines below the line of `end` (default: the
    cursor), its newline included. While it is over `max_chars`, lines are dropped from the far
    ends (below first); the lines of [cursor, end] themselves always stay."""
    end = cursor if end is None else end
    if not 0 <= cursor <= end <= len(text):
        raise ValueError(f"the span [{cursor}, {end}] is outside the text (0 to {len(text)})")
    up = [text.rfind("\n", 0, cursor) + 1]  # line starts, the cursor's first, then above
    for _ in range(max(0, before)):
        if up[-1] == 0:
            break
        up.append(text.rfind("\n", 0, up[-1] - 1) + 1)
    down = [line_end(text, end)]  # line ends, the end's first, then below
    for _ in range(max(0, after)):
        if down[-1] >= len(text):
            break
        down.append(line_end(text, down[-1]))
    while down[-1] - up[-1] > max_chars and (len(up) > 1 or len(down) > 1):
        if len(down) >= len(up) and len(down) > 1:
            down.pop()
        else:
            up.pop()
    return up[-1], down[-1]


def line_end(text: str, at: int) -> int:
    """Where the line holding `at` ends, past its newline."""
    nl = text.find("\n", at)
    return len(text) if nl < 0 else nl + 1


def history_block(edits: Sequence[Edit], language_id: str) -> str:
    """The newest `PROMPT_EDITS` edits, oldest of them first, as comment lines: the touched
    lines as they were (`-`) and as they are (`+`), each side bounded; "" for none."""
    spec = grammars.spec(language_id)
    c = spec.line_comment if spec is not None and spec.line_comment else "#"
    out: list[str] = []
    for e in list(edits)[-PROMPT_EDITS:]:
        for sign, lines in (("-", e.lines_before), ("+", e.lines_after)):
            for line in lines.split("\n")[:EDIT_LINES]:
                out.append(f"{c} {sign} {line[:EDIT_LINE_CHARS]}".rstrip())
    if not out:
        return ""
    return f"{c} recent edits, oldest first\n" + "\n".join(out) + "\n"


@dataclass(frozen=True)
class Prompt:
    """What the model sees: `prefix`, the region [start, end) of the text, `suffix`."""

    prefix: str
    suffix: str
    start: int
    end: int
    old: str  # the region's text as it is


def prompt(
    engine: Engine,
    text: str,
    start: int,
    end: int,
    edits: Sequence[Edit],
    language_id: str,
    reach: int,
) -> Prompt:
    """The prompt around text[start:end], whose rewrite takes at most `reach` positions."""
    positions = int(engine.args.max_positions)
    history = ""
    for n in range(min(len(edits), PROMPT_EDITS), 0, -1):
        history = history_block(list(edits)[-n:], language_id)
        if count(engine, history) <= positions // HISTORY_SHARE:
            break
        history = ""
    room = max(0, positions - count(engine, history) - MARGIN)
    pre, suf = budgets(room, reach, PREFIX_TOKENS, SUFFIX_TOKENS)
    before, after = tail(engine, text[:start], pre), head(engine, text[end:], suf)
    return Prompt(history + before, after, start, end, text[start:end])


def count(engine: Engine, text: str) -> int:
    return len(engine.encode(text))


def tail(engine: Engine, text: str, budget: int) -> str:
    """The most lines from the end of `text` (cut at a line start) within `budget` tokens."""
    cut = max(0, len(text) - budget * CHARS_PER_TOKEN)
    text = text[cut:]
    starts = [0] if cut == 0 else []  # a line cut in its middle is not whole
    starts += [i + 1 for i, ch in enumerate(text) if ch == "\n" and i + 1 < len(text)]
    lo, hi = 0, len(starts)  # the first start whose tail fits (len(starts): none does)
    while lo < hi:
        mid = (lo + hi) // 2
        if count(engine, text[starts[mid] :]) <= budget:
            hi = mid
        else:
            lo = mid + 1
    return text[starts[lo] :] if lo < len(starts) else ""


def head(engine: Engine, text: str, budget: int) -> str:
    """The most whole lines from the start of `text` within `budget` tokens."""
    whole = len(text) <= budget * CHARS_PER_TOKEN
    text = text[: budget * CHARS_PER_TOKEN]
    ends = [i + 1 for i, ch in enumerate(text) if ch == "\n"] + ([len(text)] if whole else [])
    lo, hi = -1, len(ends) - 1  # the last end whose head fits (-1: none does)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(engine, text[: ends[mid]]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[: ends[lo]] if lo >= 0 else ""
