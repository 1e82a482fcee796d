"""The model tier of next edits, for a trusted model: the editable region around the cursor (or
around a structural candidate's span) remasked and rewritten by the diffusion engine, with the
document's recent edits in the prompt (region.py); and `verify`, the model's agreement with
candidate edits, several in one batched pass.

- The region is masked; its old text is the natural draft and goes in as the request's draft,
  so `speculate="fast"` commits the unchanged parts in one step where the model predicts them
  back, and `speculate="exact"` decodes exactly plain decoding's tokens in fewer passes
  (speculate.py).
- Length: a model with DreamOn's expand/delete tokens changes the region's length itself
  (`InfillParams.expand`: a span of the old length with room to grow). That decoding takes no
  guesses and no drafts (speculate.py), so it is chosen only when no speculation is asked for
  (`speculate=None` picks it where the model has the tokens, the fast mode elsewhere). Otherwise
  the span is the old length plus some slack, and the model's end tokens shorten it.
- The rewrite becomes the smallest replacement of the old region (common prefix and suffix
  trimmed): a `Suggestion(kind="model")`. A rewrite equal to the old region suggests nothing,
  nor one that empties it (an end token at once: the model declining, not an edit). The block
  loop does not keep its commits' probabilities, so the score is `verify`'s.
- `verify` asks the model whether it would write a candidate: the document as it would be
  after it, its changed tokens masked (those that differ from the same lines before it; for a
  deletion, the two on either side of the seam), and the model's probability of each of them
  there, every candidate in one batched pass; the score is their geometric mean (0 to 1): a
  lower bound of the decoding's own confidence, which sees earlier commits. Read in place
  (unmasked, as the fast mode checks a draft), the builtin model scored its own garbage and
  whole deletions near 1. For an untrusted model this is only read, as agreement; the
  model's own text is never shown from it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..params import InfillParams, InfillResult, SpeculateMode
from ..request import InfillRequest, trim_context
from ..scheduler import Priority, settled
from .history import Edit, replacement
from .region import LINES_AFTER, LINES_BEFORE, Prompt, count, line_end, prompt, region
from .suggestion import MAX_TEXT_CHARS, Suggestion

if TYPE_CHECKING:
    from ..engine import Engine

MIN_SLACK = 4  # masks past the old length (fixed-length decoding): at least this many ...
SLACK_SHARE = 4  # ... or a quarter of the old length
MASKED = True
ABSOLUTE = True
REGION_SHARE = 2  # a region whose reach is over 1/2 of the positions is narrowed
# the regions tried, widest first: (lines above, lines below) the cursor's line
NARROWING = ((LINES_BEFORE, LINES_AFTER), (1, 2), (0, 1), (0, 0))


def reach(n: int) -> int:
    """The most span positions a rewrite of an `n`-token region may take."""
    return n + max(MIN_SLACK, n // SLACK_SHARE)


def variable(engine: Engine, speculate: SpeculateMode | None) -> bool:
    """Whether a rewrite changes its length with DreamOn's expand/delete: the model has them and
    no speculation is asked for."""
    return engine.expand_id is not None and speculate in (None, "off")


def request(
    engine: Engine,
    p: Prompt,
    params: InfillParams | None = None,
    speculate: SpeculateMode | None = None,
    cancel: threading.Event | None = None,
) -> InfillRequest:
    """The region's request: its old text as the draft; a span of its length with room to grow
    (`variable`), else its length plus slack, decoded in the `speculate` mode (None: fast)."""
    old_ids = tuple(engine.encode(p.old))
    n = len(old_ids)
    q = params or InfillParams()
    span = max(1, n) if variable(engine, speculate) else reach(n)
    q = replace(q, span=span, max_span=reach(n), min_tokens=min(q.min_tokens, span))
    if variable(engine, speculate):
        q = replace(q, expand=True, speculate="off")
    else:
        q = replace(q, expand=False, speculate=speculate or "fast")
    r = engine.requests(p.prefix, p.suffix, [q], cancel=cancel)[0]
    return replace(r, drafts=(old_ids,) if old_ids else ())


@dataclass(frozen=True)
class Rewrite:
    """A region rewritten: the prompt, the request and its result, the region's new text, and
    the suggestion made of it (None: no change, or the decoding was cancelled)."""

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
    """Rewrite the region around the cursor (around [cursor, end], a candidate's span) as a row
    of the engine's scheduler at `priority`, stopped by `cancel`; blocking: run it on a thread.
    The region narrows to fit the model; ValueError when even the cursor's own lines do not."""
    positions = int(engine.args.max_positions)
    for before, after in NARROWING:
        start, stop = region(text, cursor, end, before, after)
        n = count(engine, text[start:stop])
        if reach(n) * REGION_SHARE <= positions:
            break
    else:
        raise ValueError(f"the lines around offset {cursor} are too long for the model")
    p = prompt(engine, text, start, stop, edits, language_id, reach(n))
    req = request(engine, p, params, speculate, cancel)
    result = settled(engine.scheduler().submit_request(req, priority=priority))
    new = result.text
    if p.old.endswith("\n") and not new.endswith("\n") and result.stop_reason == "end_token":
        new += "\n"  # the region's last line break stays: a fill often ends just before it
    found = None
    if result.stop_reason != "cancelled":
        found = suggestion(engine, text, p, new, edits, language_id)
    return Rewrite(p, req, result, new, found)


def suggestion(
    engine: Engine, text: str, p: Prompt, new: str, edits: Sequence[Edit], language_id: str
) -> Suggestion | None:
    """The region's rewrite as a model suggestion in `text`'s offsets, scored by `verify`; None
    when it changes nothing, empties the region or is too long to show."""
    if not new.strip() and p.old.strip():
        return None  # an end token at once: the model declining, not an edit
    change = replacement(p.old, new)
    if change is None or len(change[2]) > MAX_TEXT_CHARS:
        return None
    a, b, put = change
    s = Suggestion(p.start + a, p.start + b, put, "model", 0.0)
    return replace(s, score=verify(engine, text, [s], edits, language_id)[0])


# -- verify -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScoredSpan:
    """A canvas (the document as it would be after a suggestion, cut to the model) whose
    positions [lo, hi) are masked and scored on the tokens `want` there."""

    ids: list[int]
    lo: int
    hi: int
    want: list[int]


def verify(
    engine: Engine,
    text: str,
    suggestions: Sequence[Suggestion],
    edits: Sequence[Edit] = (),
    language_id: str = "plaintext",
) -> list[float]:
    """One score per suggestion, 0 to 1: the geometric mean of the model's probabilities of its
    changed tokens, masked, all read in one batched pass. 0.0 for one that cannot be read here
    (another document's, or one too long for the model). ValueError for a span outside `text`."""
    for s in suggestions:
        if s.uri is None and s.end > len(text):
            raise ValueError(f"a suggestion's span [{s.start}, {s.end}) is outside the text")
    found = [
        window(engine, text, s, edits, language_id) if s.uri is None else None for s in suggestions
    ]
    read = [w for w in found if w is not None]
    scores = iter(score(engine, read) if read else [])
    return [next(scores) if w is not None else 0.0 for w in found]


def window(
    engine: Engine, text: str, s: Suggestion, edits: Sequence[Edit], language_id: str
) -> ScoredSpan | None:
    """The suggestion's canvas: the whole lines it touches, after it, between the prompt's
    prefix and suffix. Its changed tokens (those that differ from the same lines before it,
    common leading and trailing tokens trimmed; for a deletion, the two on either side of the
    seam) are masked and scored. None: too long for the model, or nothing to read."""
    new = s.applied(text)
    stop = s.start + len(s.text)
    lo = new.rfind("\n", 0, s.start) + 1
    hi = line_end(new, stop - 1 if stop > s.start else s.start)
    if lo == hi:  # a whole line deleted at the end: read the line before the seam
        lo = new.rfind("\n", 0, max(0, lo - 1)) + 1
    ids, old = engine.encode(new[lo:hi]), engine.encode(text[lo : hi - stop + s.end])
    positions = int(engine.args.max_positions)
    if len(ids) * REGION_SHARE > positions:
        return None
    p = prompt(engine, new, lo, hi, edits, language_id, len(ids))
    pre, suf = trim_context(engine.encode(p.prefix), engine.encode(p.suffix), positions - len(ids))
    canvas = pre + ids + suf
    first, last = (len(pre) + i for i in changed(ids, old))
    if first >= last:  # tokens only removed: the two on either side of the seam
        first, last = max(0, first - 1), min(len(canvas), first + 1)
    if first >= last:
        return None
    want = canvas[first:last]
    canvas[first:last] = [engine.mask_id] * (last - first)
    return ScoredSpan(canvas, first, last, want)


def changed(mine: Sequence[int], other: Sequence[int]) -> tuple[int, int]:
    """The tokens of `mine` that differ from `other`: [first, last), after the common leading
    and trailing tokens (empty when `mine` only lacks some of `other`'s)."""
    a, most = 0, min(len(mine), len(other))
    while a < most and mine[a] == other[a]:
        a += 1
    b = 0
    while b < most - a and mine[-1 - b] == other[-1 - b]:
        b += 1
    return a, len(mine) - b


def score(engine: Engine, windows: Sequence[ScoredSpan]) -> list[float]:
    """One full pass over every window's canvas, padded to the longest and the padding hidden
    from attention; only the scored positions go through the vocabulary projection, and the
    ids decoding never commits (the mask, control tokens) are out of the softmax, as there."""
    import torch  # here: the language server imports this module before any engine loads

    device = engine.device
    b = len(windows)
    length = max(len(w.ids) for w in windows)
    width = max(w.hi - w.lo for w in windows)
    ids = torch.zeros((b, length), dtype=torch.long)
    at = torch.zeros((b, width), dtype=torch.long)  # [B, N] the canvas positions scored
    want = torch.zeros((b, width), dtype=torch.long)  # [B, N] the tokens scored there
    valid = torch.zeros((b, width), dtype=torch.bool)
    for i, w in enumerate(windows):
        n = w.hi - w.lo
        ids[i, : len(w.ids)] = torch.tensor(w.ids, dtype=torch.long)
        at[i, :n] = torch.arange(w.lo, w.hi)
        want[i, :n] = torch.tensor(w.want, dtype=torch.long)
        valid[i, :n] = True
    lengths = torch.tensor([len(w.ids) for w in windows])
    mask = None
    if int(lengths.min()) != length:  # [B, 1, 1, L]: no query sees another row's padding
        mask = (torch.arange(length) < lengths[:, None])[:, None, None, :].to(device)
    shift = int(engine.args.logits_shift)  # logits for position j come from hidden state j - 1
    sources = (at - shift).clamp(min=0).to(device)
    positions = torch.arange(length).expand(b, -1).to(device)
    # the engine's lock: one decode step or scoring pass at a time (as Engine.remask takes it)
    with engine._lock, torch.inference_mode():
        raw = engine.model(ids.to(device), positions, mask=mask, score=sources).float()
        raw[..., engine.runner.never.to(device)] = -torch.inf
        logp = torch.log_softmax(raw, dim=-1)  # [B, N, V]
        mine = logp.gather(2, want.to(device)[..., None])[..., 0].cpu()
    means = mine.masked_fill(~valid, 0.0).sum(1) / valid.sum(1).clamp(min=1)
    return [min(1.0, max(0.0, math.exp(float(m)))) for m in means]
