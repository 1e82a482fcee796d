"""The model tier of next edits: an editable region around the cursor remasked and rewritten by
the diffusion engine, the document's recent edits in the prompt, for a trusted model.

- `region`: the whole lines around the cursor (or around a span, a structural candidate's), a
  few before and after, bounded in characters.
- The prompt: the recent edits as a comment block in the language's comment syntax (each edit's
  lines as they were, `-`, and as they are, `+`, newest last; `history_block`), then the text
  before the region; the suffix is the text after it. Both are cut at line starts to the token
  budgets the engine's `budgets` gives, the edits kept whole at the top.
- The region is masked. Its old text is the natural draft: it goes in as the request's draft,
  so `speculate="fast"` commits the unchanged parts in one step where the model agrees, and
  `speculate="exact"` decodes exactly plain decoding's tokens (speculate.py).
- Length: a model with DreamOn's expand/delete tokens changes the region's length itself
  (`InfillParams.expand`, a span of the old length, room to grow); that decoding takes no
  guesses or drafts, so it is used only when no speculation is asked for. Otherwise the span
  is the old length plus some slack, and the model's end tokens shorten it.
- The rewrite becomes the smallest replacement of the old region (common prefix and suffix
  trimmed) as a `Suggestion(kind="model")`, scored by verify.py's pass (the model's agreement
  with the changed tokens in place). A rewrite equal to the old region suggests nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import grammars

from ..params import InfillParams, InfillResult, SpeculateMode
from ..request import PREFIX_TOKENS, SUFFIX_TOKENS, InfillRequest, budgets
from ..scheduler import Priority, settled
from .history import Edit
from .suggestion import MAX_TEXT_CHARS, Suggestion
from .verify import agreement

if TYPE_CHECKING:
    from ..engine import Engine

LINES_BEFORE = 2  # whole lines of the region above the cursor's line
LINES_AFTER = 4  # and below it: a next edit is more often further down
MAX_REGION_CHARS = 1200
PROMPT_EDITS = 6  # the newest edits the prompt shows
EDIT_LINES = 4  # of each side of one edit
EDIT_LINE_CHARS = 160
HISTORY_SHARE = 4  # the edits take at most 1/4 of the model's positions
MARGIN = 8  # tokens kept free: text encoded whole may take a few more than its parts
MIN_SLACK = 4  # masks past the old length (fixed-length decoding), at least ...
SLACK_SHARE = 4  # ... or a quarter of it
# A region this much of the model's positions or more is narrowed (fewer lines around it).
REGION_SHARE = 2


def region(
    text: str,
    cursor: int,
    end: int | None = None,
    before: int = LINES_BEFORE,
    after: int = LINES_AFTER,
    max_chars: int = MAX_REGION_CHARS,
) -> tuple[int, int]:
    """The editable region: from the start of the line `before` lines above the cursor's to the
    end of the line `after` lines below the line of `end` (default: the cursor), its newline
    included. Lines are dropped from the far ends (below first) while the region is over
    `max_chars`; the lines of [cursor, end] themselves always stay."""
    end = cursor if end is None else end
    if not 0 <= cursor <= end <= len(text):
        raise ValueError(f"the span [{cursor}, {end}) is outside the text (0 to {len(text)})")
    lo = text.rfind("\n", 0, cursor) + 1
    hi = _line_end(text, end)
    up = [lo]  # line starts above, nearest first
    for _ in range(max(0, before)):
        if up[-1] == 0:
            break
        up.append(text.rfind("\n", 0, up[-1] - 1) + 1)
    down = [hi]  # line ends below, nearest first
    for _ in range(max(0, after)):
        if down[-1] >= len(text):
            break
        down.append(_line_end(text, down[-1]))
    while len(down) > 1 and down[-1] - up[-1] > max_chars and len(down) >= len(up):
        down.pop()
    while len(up) > 1 and down[-1] - up[-1] > max_chars:
        up.pop()
    while len(down) > 1 and down[-1] - up[-1] > max_chars:
        down.pop()
    return up[-1], down[-1]


def _line_end(text: str, at: int) -> int:
    """Where the line holding `at` ends, past its newline."""
    nl = text.find("\n", at)
    return len(text) if nl < 0 else nl + 1


def history_block(edits: Sequence[Edit], language_id: str) -> str:
    """The newest `PROMPT_EDITS` edits, oldest of them first, as comment lines: the touched
    lines as they were (`-`) and as they are (`+`), each side bounded."""
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
    """What the model sees: `prefix`, the region [start, end) of the text masked, `suffix`."""

    prefix: str
    suffix: str
    start: int
    end: int
    old: str  # the region's text as it is


def prompt(
    engine: Engine, text: str, start: int, end: int, edits: Sequence[Edit], language_id: str
) -> Prompt:
    """The prompt around the region, cut at line starts to the budgets beside its furthest
    reach (`_reach`): the edits whole (at most 1/HISTORY_SHARE of the positions, the oldest
    dropped first), the text before and after within the engine's context budgets."""
    positions = int(engine.args.max_positions)
    old = text[start:end]
    reach = _reach(engine, len(engine.encode(old)))
    history = ""
    for n in range(min(len(edits), PROMPT_EDITS), 0, -1):
        history = history_block(list(edits)[-n:], language_id)
        if _count(engine, history) <= positions // HISTORY_SHARE:
            break
        history = ""
    room = positions - _count(engine, history) - MARGIN
    pre, suf = budgets(room, reach, PREFIX_TOKENS, SUFFIX_TOKENS)
    before = _tail(engine, text[:start], pre)
    return Prompt(history + before, _head(engine, text[end:], suf), start, end, old)


def _count(engine: Engine, text: str) -> int:
    return len(engine.encode(text))


def _tail(engine: Engine, text: str, budget: int) -> str:
    """The most lines from the end of `text` (cut at a line start) within `budget` tokens."""
    text = text[max(0, len(text) - budget * 8) :]  # no token is longer than 8 characters here
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n" and i + 1 < len(text)]
    lo, hi = 0, len(starts)  # the first start whose tail fits; len(starts): none does
    while lo < hi:
        mid = (lo + hi) // 2
        if _count(engine, text[starts[mid] :]) <= budget:
            hi = mid
        else:
            lo = mid + 1
    return text[starts[lo] :] if lo < len(starts) else ""


def _head(engine: Engine, text: str, budget: int) -> str:
    """The most whole lines from the start of `text` within `budget` tokens."""
    text = text[: budget * 8]
    ends = [i + 1 for i, ch in enumerate(text) if ch == "\n"] + [len(text)]
    lo, hi = -1, len(ends) - 1  # the last end whose head fits; -1: none does
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _count(engine, text[: ends[mid]]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[: ends[lo]] if lo >= 0 else ""


def _slack(n: int) -> int:
    return max(MIN_SLACK, n // SLACK_SHARE)


def _reach(engine: Engine, n: int) -> int:
    """The most span positions a rewrite of an `n`-token region may take."""
    return n + _slack(n)


def variable(engine: Engine, speculate: SpeculateMode | None) -> bool:
    """Whether a rewrite changes its length with DreamOn's expand/delete: the model has them and
    no speculation is asked for (None picks it where it can, the fast mode elsewhere)."""
    return engine.expand_id is not None and speculate in (None, "off")


def request(
    engine: Engine,
    p: Prompt,
    params: InfillParams | None = None,
    speculate: SpeculateMode | None = None,
    cancel: threading.Event | None = None,
) -> InfillRequest:
    """The region's request: the old text as the draft, and a span of its length, with room to
    grow (expand) or slack (fixed length) as `variable` says."""
    old_ids = tuple(engine.encode(p.old))
    n = len(old_ids)
    base = params or InfillParams()
    if variable(engine, speculate):
        span = max(1, n)
        q = replace(base, span=span, max_span=_reach(engine, n), expand=True, speculate="off")
    else:
        span = _reach(engine, n)
        mode: SpeculateMode = speculate or "fast"
        q = replace(base, span=span, max_span=span, expand=False, speculate=mode)
    q = replace(q, min_tokens=0)
    r = engine.requests(p.prefix, p.suffix, [q], cancel=cancel)[0]
    return replace(r, drafts=(old_ids,) if old_ids else ())


@dataclass(frozen=True)
class Rewrite:
    """A region rewritten: the prompt, the request and its result, the region's new text and the
    suggestion made of it (None: no change, or the decoding was cancelled)."""

    prompt: Prompt
    request: InfillRequest
    result: InfillResult
    new: str
    suggestion: Suggestion | None


def rewrite(
    engine: Engine,
    text: str,
    cursor: int,
    edits: Sequence[Edit] = (),
    language_id: str = "plaintext",
    *,
    end: int | None = None,
    params: InfillParams | None = None,
    speculate: SpeculateMode | None = None,
    cancel: threading.Event | None = None,
    priority: Priority = "automatic",
) -> Rewrite:
    """Rewrite the region around the cursor (around [cursor, end), a candidate's span) on the
    engine's scheduler at `priority`; blocking: run it on a thread. ValueError for a region
    too long for the model, even narrowed to the cursor's own lines."""
    positions = int(engine.args.max_positions)
    for before, after in ((LINES_BEFORE, LINES_AFTER), (1, 2), (0, 1), (0, 0)):
        start, stop = region(text, cursor, end, before, after)
        n = _count(engine, text[start:stop])
        if _reach(engine, n) * REGION_SHARE <= positions:
            break
    else:
        raise ValueError(f"the lines around offset {cursor} are too long for the model")
    p = prompt(engine, text, start, stop, edits, language_id)
    req = request(engine, p, params, speculate, cancel)
    ticket = engine.scheduler().submit_request(req, priority=priority)
    result = settled(ticket)
    new = result.text
    if p.old.endswith("\n") and not new.endswith("\n") and result.stop_reason == "end_token":
        new += "\n"  # the region's last line break stays: a fill often ends just before it
    found = None
    if result.stop_reason != "cancelled":
        found = suggestion(engine, text, p, new, edits, language_id)
    return Rewrite(p, req, result, new, found)


def replacement(old: str, new: str) -> tuple[int, int, str] | None:
    """The smallest replacement turning `old` into `new`: (start, end, text) within `old`, the
    common prefix and suffix trimmed; None when they are equal."""
    if old == new:
        return None
    a = 0
    while a < min(len(old), len(new)) and old[a] == new[a]:
        a += 1
    b = 0
    while b < min(len(old), len(new)) - a and old[-1 - b] == new[-1 - b]:
        b += 1
    return a, len(old) - b, new[a : len(new) - b]


def suggestion(
    engine: Engine, text: str, p: Prompt, new: str, edits: Sequence[Edit], language_id: str
) -> Suggestion | None:
    """The region's rewrite as a model suggestion in `text`'s offsets, scored by the model's
    agreement with it (verify.py); None when it changes nothing or is too long to show."""
    change = replacement(p.old, new)
    if change is None or len(change[2]) > MAX_TEXT_CHARS:
        return None
    a, b, put = change
    s = Suggestion(p.start + a, p.start + b, put, "model", 0.0)
    return replace(s, score=agreement(engine, text, [s], edits, language_id)[0])
