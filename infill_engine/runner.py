"""The block loop: canvases `prefix | [MASK] x n | suffix`, decoded block by block, left to right.

Every request is a `Row`: what was asked (`RowRequest`: params, cancel flag, random stream, which
never change) and its own progress, so requests of different lengths share forward passes, and
join and leave a running `Batch` between steps. One step of the loop is at most two batched
passes:
- a full pass for the rows that start a block (or run without a cache); it also refreshes their
  K/V in the shared `KVCache`;
- a window pass for the rows inside a block: only the block (dual) or block..end (prefix) is
  recomputed, against the cached K/V of the rest.
Then each row commits tokens by its own policy (decode.py), applies the end-token rule, and moves
on. Rows finish, or are cancelled, independently; their cache rows are dropped at once.

The end-token rule: once an end token is committed at span position e, every span position after
e becomes an end token without any model call, and the text stops at e. A row whose span has no
mask left is finished: no pass is ever spent after the end is decided.

The span's length can move, in three ways, each only where the request allows it:
- the stop rule (a request's `stop`, from the span planner): once the committed head of the span
  closes the construct (a line's newline, a block's dedent or closing brace), the rest of the span
  is filled as after an end token, and the row stops with "syntax";
- growth: a span that fills with no end token while the construct is still open gets another block
  of masks, up to `max_span`;
- DreamOn's expand/delete (`variable`): a committed `<|expand|>` becomes two masks, a committed
  `<|delete|>` removes its position.
Each of these edits happens between passes and moves the suffix, so the row's next pass is a full
one: it recomputes every position's K/V, and the cache never holds a key at a stale position. The
cache is allocated at the longest canvas any of its rows may reach.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from torch import Tensor

from . import decode, speculate
from .cache import KVCache
from .graphs import WindowGraphs, WindowPass
from .models.common import DiffusionTransformer
from .row import Observer, Row, RowRequest, StepEvent, StopFn

__all__ = ["Batch", "BlockRunner", "Observer", "Row", "RowRequest", "StepEvent", "StopFn"]


class BlockRunner:
    def __init__(
        self,
        model: DiffusionTransformer,
        mask_id: int,
        end_ids: Sequence[int],
        reserved_ids: Sequence[int] = (),
        expand_id: int | None = None,
        delete_id: int | None = None,
    ) -> None:
        self.model = model
        self.mask_id = mask_id
        # never a prediction: the mask itself and control tokens such as DreamOn's expand/delete
        self.never = torch.tensor(sorted({mask_id, *reserved_ids}), dtype=torch.long)
        # ... except that a variable-length row may commit expand/delete, which are then applied
        self.expand_id, self.delete_id = expand_id, delete_id
        controls = {i for i in (expand_id, delete_id) if i is not None}
        self.never_variable = torch.tensor(
            sorted({mask_id, *reserved_ids} - controls), dtype=torch.long
        )
        device = next(model.parameters()).device  # the end rule meets the canvases there
        self.end_ids = torch.tensor(sorted(set(end_ids)), dtype=torch.long, device=device)
        self.fill_id = int(end_ids[0])
        self.shift = model.args.logits_shift
        # window passes replayed as CUDA graphs on a GPU (graphs.py); None: always eager
        self.graphs: WindowGraphs | None = WindowGraphs.for_device(model)

    def batch(self) -> Batch:
        return Batch(self)

    def step(self, rows: list[Row], cache: KVCache) -> None:
        """One step for live rows: at most a full pass and a window pass, then each row commits
        by its own policy and moves on (`settle`).

        A row that speculates (speculate.py) brings extra rows to the window pass, which then
        runs even in a step where the row itself had the full pass (the cache is fresh by then):
        guesses of its next states, whose logits serve the steps they turn out to be, and in the
        fast mode its draft, committed as this step when the model predicts it back."""
        full = [r for r in rows if r.fresh_block or not r.uses_cache]
        part = [r for r in rows if not (r.fresh_block or not r.uses_cache)]
        plans = [speculate.plan(r, self.mask_id, self.end_ids, self.fill_id) for r in rows]
        full_logits = self.full_pass(full, cache) if full else None
        extra = [(r, c) for r, p in zip(rows, plans, strict=True) for c in p.canvases]
        window = [*part, *(r for r, _ in extra)]
        canvases = [r.canvas for r in part] + [c for _, c in extra]
        logits = self.window_pass(window, cache, canvases) if window else None
        at, took = len(part), set()
        for row, plan in zip(rows, plans, strict=True):
            plan.at = at
            at += len(plan.canvases)
            if (
                plan.drafted is not None
                and logits is not None
                and self._take_draft(row, plan, logits)
            ):
                took.add(id(row))
        for group, group_logits in ((full, full_logits), (part, logits)):
            keep = [i for i, r in enumerate(group) if id(r) not in took]
            if not keep or group_logits is None:
                continue
            if len(keep) == len(group):  # a view (the window's own rows lead): no copy
                self._commit(group, group_logits[: len(group)])
            else:
                self._commit([group[i] for i in keep], group_logits[keep])
        for row, plan in zip(rows, plans, strict=True):
            if plan.guesses and logits is not None and id(row) not in took:
                self._follow(row, plan, logits[plan.at : plan.at + len(plan.guesses)])
        for row in rows:
            self.settle(row)

    # -- speculation ----------------------------------------------------------------------------
    def _follow(self, row: Row, plan: speculate.Plan, logits: Tensor) -> None:
        """After the row's own commit: take the next steps on the logits of the guesses that
        match the state it is in, as long as one does."""
        for _ in plan.guesses:  # each step commits more, so no guess serves twice: a bound
            lo, hi = row.block_start, row.block_end
            if row.stop_reason is not None or row.fresh_block:
                break
            if not bool((row.canvas[lo:hi] == self.mask_id).any()):
                break
            j = plan.match(row, self.shift)
            if j is None:
                break
            self._commit([row], logits[j : j + 1])
            row.verified += 1

    def _take_draft(self, row: Row, plan: speculate.Plan, logits: Tensor) -> bool:
        """Commit the row's draft as this step when the model, over the drafted block, predicts
        back every drafted position still masked (speculate.agrees)."""
        assert plan.drafted is not None
        lo, hi = row.block_start, row.block_end
        block = plan.drafted[lo:hi]
        own = logits[plan.at + len(plan.guesses)].clone()  # the draft row is the plan's last
        scores = self._block_scores(row, own, self.never)
        still = speculate.agrees(scores.argmax(-1), row.canvas[lo:hi], block, self.mask_id)
        if still is None:
            return False
        row.drafted += int(still.sum())
        self._apply(row, still, block)
        return True

    # -- passes ---------------------------------------------------------------------------------
    def full_pass(self, rows: list[Row], cache: KVCache) -> Tensor:
        """One pass over whole canvases; returns logits [b, Wmax, V] for each row's block."""
        length = max(r.length for r in rows)
        ids = self._stack([r.canvas for r in rows], length)
        positions = torch.arange(length, device=ids.device).expand(len(rows), -1)
        mask = self._key_mask(rows, length)
        score = self._stack([self._sources(r, offset=0) for r in rows])
        store = cache.refresh(self._slots(rows, cache)) if any(r.uses_cache for r in rows) else None
        for row in rows:
            row.nfe_full += 1
            row.fresh_block = False
        return self.model(ids, positions, mask=mask, store=store, score=score)

    def window_pass(
        self, rows: list[Row], cache: KVCache, canvases: list[Tensor] | None = None
    ) -> Tensor:
        """Recompute only the block (dual) or block..end (prefix), attending to cached K/V; a
        row's guesses come as the same row again with another canvas (same slot, same K/V)."""
        starts, ends = [], []
        for row in rows:
            starts.append(row.block_start - self.shift)
            ends.append(row.block_end if row.request.params.cache == "dual" else row.length)
        width = max(e - s for s, e in zip(starts, ends, strict=True))
        offsets = torch.arange(width, device=rows[0].canvas.device)
        raw = torch.stack([s + offsets for s in starts])  # [b, W] unclamped positions
        hi = torch.tensor([r.length - 1 for r in rows], device=raw.device)[:, None]
        positions = raw.clamp(min=0).minimum(hi)
        canvases = canvases or [r.canvas for r in rows]
        ids = torch.stack([c[p] for c, p in zip(canvases, positions, strict=True)])
        block_starts = torch.tensor([r.block_start for r in rows], device=raw.device)[:, None]
        write = (raw >= block_starts) & (raw < torch.tensor(ends, device=raw.device)[:, None])
        score = self._stack([self._sources(r, offset=s) for r, s in zip(rows, starts, strict=True)])
        mask = self._key_mask(rows, cache.length + 1)
        window = WindowPass(ids, positions, write, self._slots(rows, cache), mask, score)
        for row in {id(r): r for r in rows}.values():  # a row's guesses ride on its pass
            row.nfe_block += 1
        if self.graphs is not None:
            return self.graphs(cache, window)
        return window.run(self.model, cache)

    def _sources(self, row: Row, offset: int) -> Tensor:
        """Indices (into the pass's tokens) of the hidden states that score the block positions."""
        j = torch.arange(row.block_start, row.block_end, device=row.canvas.device)
        return (j - self.shift).clamp(min=0) - offset

    def _key_mask(self, rows: list[Row], keys: int) -> Tensor | None:
        lengths = torch.tensor([r.length for r in rows], device=rows[0].canvas.device)
        if keys == int(lengths.min()) and keys == int(lengths.max()):
            return None  # nothing to hide: let SDPA take its unmasked path
        return (torch.arange(keys, device=lengths.device) < lengths[:, None])[:, None, None, :]

    @staticmethod
    def _slots(rows: list[Row], cache: KVCache) -> Tensor | None:
        slots = [r.slot for r in rows]
        if slots == list(range(cache.batch)):
            return None  # every row, in order: write the cache in place
        return torch.tensor(slots, device=rows[0].canvas.device)

    @staticmethod
    def _stack(seqs: list[Tensor], length: int | None = None) -> Tensor:
        length = length or max(int(s.shape[0]) for s in seqs)
        out = seqs[0].new_zeros((len(seqs), length))
        for i, s in enumerate(seqs):
            out[i, : s.shape[0]] = s
        return out

    # -- commits --------------------------------------------------------------------------------
    def _commit(self, rows: list[Row], logits: Tensor) -> None:
        variable = any(r.request.variable for r in rows)
        banned = self.never_variable if variable else self.never
        logits[..., banned.to(logits.device)] = -torch.inf
        for row, row_logits in zip(rows, logits, strict=True):
            ban = None
            if variable and not row.request.variable:
                ban = self.never
            elif row.request.variable and row.edits >= 2 * row.max_span:
                # A bound on expand/delete churn: a model that keeps trading one for the other
                # would never finish; past it the row decodes at its current length.
                ban = self.never
            elif row.request.variable and self.expand_id is not None and not row.can_expand:
                ban = torch.tensor([self.expand_id])  # no room left to expand into
            p = row.request.params
            scores = self._block_scores(row, row_logits, ban)
            token, conf = decode.propose(scores, p.temperature, p.top_p, row.request.generator)
            row.seen = (token, conf)
            masked = row.canvas[row.block_start : row.block_end] == self.mask_id
            pick = decode.select(conf, masked, p, block_len=int(masked.shape[0]), step=row.step)
            self._apply(row, pick, token)

    def _block_scores(self, row: Row, row_logits: Tensor, ban: Tensor | None) -> Tensor:
        """A row's logits over its block [n, V], less what it may not commit: `ban`, and end
        tokens before its min_tokens. Changes `row_logits` in place."""
        if ban is not None:
            row_logits[..., ban.to(row_logits.device)] = -torch.inf
        lo, hi = row.block_start, row.block_end
        scores = row_logits[: hi - lo]
        early = row.request.params.min_tokens - (lo - row.span_start)  # before min_tokens
        if early > 0:
            scores[:early, self.end_ids] = -torch.inf
        return scores

    def _apply(self, row: Row, pick: Tensor, token: Tensor) -> None:
        """Commit `token` at the block positions `pick`, then the rules that follow a commit."""
        block = row.canvas[row.block_start : row.block_end]
        block[pick] = token[pick]
        n = int(pick.sum())
        row.committed += n
        row.trace.append(n)
        row.step += 1
        if row.request.variable:
            self._apply_edits(row)
        self._apply_end_rule(row)
        self._apply_stop_rule(row)

    def _apply_edits(self, row: Row) -> None:
        """DreamOn: each committed expand becomes two masks, each committed delete goes away."""
        if row.edits >= 2 * row.max_span:
            # Past the churn bound the row keeps its length. Expand and a reserved delete are
            # banned by then; a delete that is also an end token (DreamOn-v0's) now ends the
            # span, or deleting and growing a still-open construct would trade places forever.
            return
        lo, hi = row.block_start, row.block_end
        controls = [i for i in (self.expand_id, self.delete_id) if i is not None]
        block = row.canvas[lo:hi]
        hits = torch.isin(block, torch.tensor(controls, device=block.device)).nonzero()
        if not hits.numel():
            return
        pieces, prev = [], 0
        mask = row.canvas.new_full((2,), self.mask_id)
        for p in (lo + int(h) for h in hits[:, 0]):
            pieces.append(row.canvas[prev:p])
            if int(row.canvas[p]) == self.expand_id:
                room = row.can_expand
                pieces.append(mask if room else mask[:1])  # at the cap: a plain mask again
                row.span_end += room
            else:
                row.span_end -= 1
            prev = p + 1
        pieces.append(row.canvas[prev:])
        row.canvas = torch.cat(pieces)
        if row.request.limit:
            # as in growth, the far suffix end gives way
            row.canvas = row.canvas[: row.request.limit]
        row.committed -= int(hits.shape[0])  # control tokens are not text
        row.edits += int(hits.shape[0])
        row.fresh_block = True  # positions moved: the next pass recomputes every K/V
        row.checked = 0
        row.end_at = None  # positions moved: the end rule below finds the first end token again

    def _apply_stop_rule(self, row: Row) -> None:
        """Stop once the committed head of the span closes the construct it fills."""
        if row.stop is None or row.cut:
            return
        end = row.end_at if row.end_at is not None else row.span_end
        head = row.canvas[row.span_start : end]
        masks = (head == self.mask_id).nonzero()
        n = int(masks[0, 0]) if masks.numel() else int(head.numel())
        if n <= row.checked:
            return
        row.checked = n
        try:
            keep = row.stop(head[:n].tolist())
        except Exception as e:  # the request's own rule failed (or ran too long): it alone ends
            row.error, row.stop_reason = e, "cancelled"
            return
        if keep is None:
            return
        if keep < row.request.params.min_tokens:
            # The construct ended before the fill's minimum: min_tokens is what the caller
            # asked for, so the rule gives way and the span is a plain budget again.
            row.stop = None
            return
        row.canvas[row.span_start + keep : row.span_end] = self.fill_id
        row.end_at = row.span_start + keep
        row.cut = True

    def _apply_end_rule(self, row: Row) -> None:
        span = row.canvas[row.span_start : row.span_end]  # a view: the rule fills it in place
        first = decode.end_rule(span, self.end_ids, self.fill_id)
        if first is not None:
            row.end_at = row.span_start + first

    def settle(self, row: Row) -> None:
        """Move to the next block that still has masks, or finish the row."""
        if row.stop_reason is not None:
            return
        while row.block_start < row.span_end:
            if bool((row.canvas[row.block_start : row.block_end] == self.mask_id).any()):
                return
            row.block_start = row.block_end
            row.step = 0
            row.fresh_block = True
            row.seen = None
        if row.end_at is None and self._grow(row):
            return
        if row.cut:
            row.stop_reason = "syntax"
        else:
            row.stop_reason = "end_token" if row.end_at is not None else "span_full"

    def _grow(self, row: Row) -> bool:
        """Append a block of masks to a full span whose construct is still open."""
        if row.stop is None:
            return False  # no construct known: the span is only a budget
        n = min(row.request.params.block_size, row.max_span - row.span_len)
        if row.request.limit:
            n = min(n, row.request.limit - row.span_end)
        if n <= 0:
            return False
        masks = row.canvas.new_full((n,), self.mask_id)
        canvas = torch.cat([row.canvas[: row.span_end], masks, row.canvas[row.span_end :]])
        limit = row.request.limit
        row.canvas = canvas[:limit] if limit else canvas  # the far suffix end goes
        row.block_start, row.span_end = row.span_end, row.span_end + n
        row.step, row.fresh_block = 0, True  # the suffix moved: a full pass refreshes all K/V
        row.seen = None
        row.grown += n
        return True


class Batch:
    """The rows decoding together on one runner, and their shared `KVCache`.

    Rows join (`admit`) and leave between steps: continuous batching at step granularity. A
    joining row needs no more than a cache slot, because its first pass is a full one (a block
    start) that writes its K/V at every position; the cache grows by slots, and in length when
    the row's canvas is the longest. A row that ends or is cancelled leaves at the end of the
    step it ends in, and its cache slot is dropped at once.
    """

    def __init__(self, runner: BlockRunner) -> None:
        self.runner = runner
        self.rows: list[Row] = []  # live rows; row.slot is the row's index in the cache
        self.cache = KVCache(runner.model.args.num_layers, 0, 0)
        self.steps = 0

    def __len__(self) -> int:
        return len(self.rows)

    @torch.inference_mode()
    def admit(self, rows: list[Row]) -> list[Row]:
        """Join rows before the next step; returns those that ended without a pass (an empty
        span): they never take a slot."""
        now = time.perf_counter()
        done: list[Row] = []
        joining: list[Row] = []
        for row in rows:
            self.runner.settle(row)
            (joining if row.stop_reason is None else done).append(row)
        if joining:
            first = self.cache.batch
            self.cache.grow(len(joining), max(r.max_length for r in joining))
            for i, row in enumerate(joining):
                row.slot, row.joined_at = first + i, now
            self.rows.extend(joining)
        return done

    @torch.inference_mode()
    def step(self) -> list[Row]:
        """One step of every live row; returns the rows that ended in it (cancelled ones too)."""
        for row in self.rows:
            if row.request.cancel is not None and row.request.cancel.is_set():
                row.stop_reason = "cancelled"
        live = [r for r in self.rows if r.stop_reason is None]
        if live:
            self.runner.step(live, self.cache)
        self.steps += 1
        now = time.perf_counter()
        ended = [r for r in self.rows if r.stop_reason is not None]
        if ended:
            for row in ended:
                row.elapsed_ms = (now - row.joined_at) * 1000
            self.rows = [r for r in self.rows if r.stop_reason is None]
            self._compact()
        return ended

    def event(self) -> StepEvent:
        return StepEvent(self.steps, len(self.rows), self.cache.batch, self.cache.nbytes)

    def close(self) -> None:
        """Free the cache; rows still live are cancelled."""
        for row in self.rows:
            row.stop_reason = "cancelled"
        self.rows = []
        self.cache.release()

    def _compact(self) -> None:
        if not self.rows:
            self.cache.release()
            return
        keep = torch.tensor([r.slot for r in self.rows], dtype=torch.long)
        if self.cache.k:
            keep = keep.to(self.cache.k[0].device)
        self.cache.keep(keep)
        for i, row in enumerate(self.rows):
            row.slot = i
