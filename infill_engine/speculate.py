"""Guessed states, checked in the pass that computes the current one: several decoding steps for
one forward pass, and drafts committed where the model agrees with them.

Plain decoding walks states s0 -> s1 -> s2 ..., one pass each: the pass over s_t decides which
positions s_t+1 commits. A window pass (runner.py) can carry more rows than the batch's: here
each live row brings a few *guesses* of the states ahead of it, as extra window rows that share
the row's cache slot. Inside a block only the window differs between them, and the K/V around it
is the row's own, frozen since the block's start; a guess writes nothing the row later reads (the
window is recomputed by every pass). When the commits the real pass decides produce exactly one
of the guesses, that guess's logits are the next step's, already computed: the row takes that
step too, with no pass of its own, and goes on down the chain while guesses keep matching.

- **exact** (`InfillParams.speculate="exact"`): only that. A guess's logits are used only when its
  window is token for token the state the row is in, so the tokens are plain decoding's, by
  construction; what changes is how many passes a fill needs (and each pass has more rows).
- **fast**: exact, plus one more row holding a draft (`InfillRequest.drafts`: lines from the
  workspace, drafts/) in every masked position it covers, from the block's first step on. When
  the model, seeing the whole draft and the suffix, predicts every one of its tokens back, the
  draft is committed as that step; what follows it is decoded as usual (the model decides
  where the fill ends). Plain decoding might have written something else: that mode is
  measured as its own (docs/drafts.md), never passed off as exact.

The guesses take the masked positions in order of the last pass's confidence (on whichever
earlier state of the block it saw): the commit it foresaw (the positions it was already sure of,
at least its most confident), the runner-up alone, then one more position per guess down the
chain. Their tokens are the last pass's argmax, except where it was unsure and a draft has a
token there. On held-out code with the builtin model most steps commit one token, and this order
found more next states than nested-only or left-to-right guesses (docs/drafts.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .decode import end_rule
from .params import threshold_or_default
from .row import Row

UNSURE = 0.5  # below this confidence a guess takes a draft's token rather than the argmax


@dataclass
class Plan:
    """A row's extra window rows for one pass, as whole canvases: its guesses, then its draft."""

    guesses: list[Tensor]
    drafted: Tensor | None = None  # the canvas with the draft in the block (fast mode)
    at: int = 0  # where its rows start in the window pass (the runner sets it)

    @property
    def canvases(self) -> list[Tensor]:
        return self.guesses if self.drafted is None else [*self.guesses, self.drafted]

    def match(self, row: Row, shift: int) -> int | None:
        """The guess whose window (what the row's next window pass would read) is the row's
        now, token for token; None when none is."""
        lo = max(0, row.block_start - shift)
        hi = row.block_end if row.request.params.cache == "dual" else row.length
        now = row.canvas[lo:hi]
        return next((i for i, g in enumerate(self.guesses) if torch.equal(g[lo:hi], now)), None)


def plan(row: Row, mask_id: int, end_ids: Tensor, fill_id: int) -> Plan:
    """A row's extra rows for the coming window pass: guesses of its next states (once a pass
    has seen its block) and, in the fast mode, its draft; none for a row that does not
    speculate, or has no cache for a window pass to read."""
    mode = row.request.params.speculate
    if mode == "off" or row.request.variable or not row.uses_cache:
        return Plan([])
    lo, hi = row.block_start, row.block_end
    block = row.canvas[lo:hi]
    chosen = pick_draft(row.canvas, row.span_start, hi, row.request.drafts, mask_id)
    draft = aligned(chosen, lo - row.span_start, hi - lo)
    blocks: list[Tensor] = []
    if row.seen is not None and row.seen[0].shape[0] == block.shape[0] and not row.fresh_block:
        token, conf = row.seen
        tau = threshold_or_default(row.request.params.threshold)
        width = row.request.params.lookahead
        blocks = guesses(block, mask_id, token, conf, tau, draft, width, end_ids, fill_id)
    drafted = None
    if mode == "fast" and draft is not None:
        drafted = draft_block(block, mask_id, draft)

    def canvas(b: Tensor) -> Tensor:
        out = row.canvas.clone()
        out[lo:hi] = b
        return out

    return Plan([canvas(b) for b in blocks], None if drafted is None else canvas(drafted))


def pick_draft(
    canvas: Tensor, start: int, end: int, drafts: Sequence[Tensor], mask_id: int
) -> Tensor | None:
    """The first draft (ids from the span's start) that agrees with every position of the span
    committed so far in [start, end); None when none does."""
    head = canvas[start:end]
    done = head != mask_id
    for d in drafts:
        n = min(int(d.shape[0]), int(head.shape[0]))
        if bool((head[:n][done[:n]] == d[:n][done[:n]]).all()):
            return d
    return None


def aligned(draft: Tensor | None, offset: int, width: int) -> Tensor | None:
    """A draft's ids at a block of `width` positions starting `offset` into the span; -1 where
    the draft has no token. None when it covers none of the block."""
    if draft is None or offset >= int(draft.shape[0]):
        return None
    out = torch.full((width,), -1, dtype=torch.long, device=draft.device)
    part = draft[offset : offset + width]
    out[: part.shape[0]] = part
    return out


def guesses(
    block: Tensor,
    mask_id: int,
    token: Tensor,
    conf: Tensor,
    tau: float,
    draft: Tensor | None,
    width: int,
    end_ids: Tensor,
    fill_id: int,
) -> list[Tensor]:
    """Up to `width` guesses of the block's next states. `block` [W] is its ids now;
    `token`, `conf` [W] the last pass's argmax and confidence over it; `draft` [W] a draft's ids
    (-1: none). A guess that commits an end token fills the block after it as the end rule does.
    No guess fills the block: a full block moves on to a full pass, which no guess can serve."""
    masked = block == mask_id
    n = int(masked.sum())
    if n <= 1 or width <= 0:
        return []
    tok = token.clone()
    if draft is not None:
        use = (draft >= 0) & (conf < UNSURE)
        tok[use] = draft[use]
    score = conf.float().masked_fill(~masked, -math.inf)
    order = score.argsort(descending=True, stable=True)[:n]
    first = max(int((score >= tau).sum()), 1)
    # the commit the last pass foresaw (those it was sure of, else its most confident), the
    # runner-up alone (the model often commits its second choice next), then the chain on
    sets = [order[:first], order[first : first + 1]]
    sets += [order[:m] for m in range(first + 1, n)]
    out = []
    for idx in [s for s in sets if 0 < s.numel() < n][:width]:
        g = block.clone()
        g[idx] = tok[idx]
        end_rule(g, end_ids, fill_id)
        out.append(g)
    return out


def draft_block(block: Tensor, mask_id: int, draft: Tensor) -> Tensor | None:
    """The block with the draft in every masked position it covers (what follows the draft
    stays masked: the model decides where the fill ends); None when it changes nothing."""
    put = (block == mask_id) & (draft >= 0)
    if not bool(put.any()):
        return None
    filled = block.clone()
    filled[put] = draft[put]
    return filled


def agrees(predicted: Tensor, block: Tensor, drafted: Tensor, mask_id: int) -> Tensor | None:
    """After a pass over the `drafted` block (`draft_block`), with `block` as it is now: the
    drafted positions to commit (bool [W]) when the model predicts back every one of them still
    masked and no commit contradicts the draft; None otherwise. All or nothing: with the
    builtin model, committing the agreeing head of a draft (as prompt-lookup decoding does for
    an autoregressive model) left fills such as `result = [` that plain decoding never writes."""
    drafted_at = drafted != mask_id
    now = block != mask_id
    if bool((now & drafted_at & (drafted != block)).any()):
        return None
    still = drafted_at & ~now
    if not bool(still.any()) or not bool((predicted[still] == drafted[still]).all()):
        return None
    return still
