"""`Engine`: text in, infill out. Encodes holes into requests and runs them on its one scheduler.

The engine owns the device, the model and the one `Scheduler` in front of it (`scheduler()`),
which it makes on its own batch factory (`live_batch`): the scheduler never sees the engine.
Requests become rows and rows results in rows.py (`Engine.rows`); `BlockRunner` (runner.py)
owns the step over rows; decode policies and caches live in decode.py and cache.py.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .batch import LiveBatch
from .models import DiffusionTransformer
from .params import InfillParams, InfillResult, RefineResult, threshold_or_default
from .request import (
    DEFAULT_PARAMS,
    InfillRequest,
    RequestLike,
    SpanPlanLike,
    fit_context,
    initial_span,
    span_reach,
    trim_context,
)
from .rows import Remask, Rows
from .runner import BlockRunner, Observer
from .scheduler import MAX_BATCH, MAX_QUEUE, Scheduler, settled
from .watchdog import Watchdog


class Engine:
    def __init__(
        self,
        model: DiffusionTransformer,
        tokenizer: Any | None,
        mask_id: int,
        end_ids: Sequence[int],
        family: str = "dream",
        path: Path | None = None,
        threshold: float | None = None,
        reserved_ids: Sequence[int] = (),
        expand_id: int | None = None,
        delete_id: int | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        if tokenizer is not None:
            # a text caller's context is trimmed once (trim_context): the tokenizer must not warn
            tokenizer.model_max_length = 1 << 60
        self.mask_id = mask_id
        self.end_ids = tuple(end_ids)
        self.family = family
        self.path = path
        # τ for requests that leave it to the model (InfillParams.threshold None)
        self.threshold = threshold_or_default(threshold)
        self.args = model.args
        self.expand_id, self.delete_id = expand_id, delete_id
        # DreamOn-v0 deletes with its end token, which must stay committable as an end
        controls = [i for i in (expand_id, delete_id) if i is not None and i not in self.end_ids]
        self.reserved_ids = tuple(dict.fromkeys([*reserved_ids, *controls]))
        self.runner = BlockRunner(
            model, mask_id, self.end_ids, self.reserved_ids, expand_id, delete_id
        )
        # the request's own code in a step (its stop rule) is bounded: past it the request fails
        self.watchdog = Watchdog()
        # requests -> rows -> results (rows.py): the live batch's conversions, and the tests'
        self.rows = Rows(
            mask_id,
            self.threshold,
            self.args.max_positions,
            self.device,
            self.decode_ids,
            self.watchdog,
            variable=expand_id is not None or delete_id is not None,
        )
        self._lock = threading.Lock()  # one decode step (or loop, or scoring pass) at a time
        self._scheduler: Scheduler | None = None
        self._scheduler_lock = threading.Lock()

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    # -- the contract -----------------------------------------------------------------------------
    @torch.inference_mode()
    def logits(self, input_ids: Tensor) -> Tensor:
        """One full bidirectional pass. [B, L] -> [B, L, V]; logits[:, i] scores the token at i."""
        ids = input_ids.to(self.device)
        positions = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
        raw = self.model(ids, positions)
        if self.args.logits_shift:
            raw = torch.cat([raw[:, :1], raw[:, :-1]], dim=1)
        return raw.float()

    def infill(
        self,
        prefix: str,
        suffix: str,
        params: InfillParams | None = None,
        cancel: threading.Event | None = None,
        observer: Observer | None = None,
        plan: SpanPlanLike | None = None,
    ) -> InfillResult:
        request = self.request(prefix, suffix, params, plan=plan, cancel=cancel)
        return self.infill_batch([request], observer=observer)[0]

    def infill_batch(
        self, requests: Sequence[RequestLike], observer: Observer | None = None
    ) -> list[InfillResult]:
        """Submit the requests to this engine's scheduler and wait: calls from several threads
        share forward passes. With an `observer` (it sees every step of one loop) they run in
        a loop of their own instead (`run`)."""
        reqs = [self._as_request(r) for r in requests]
        if observer is not None or not reqs:
            return self.run(reqs, observer=observer)
        tickets = [self.scheduler().submit_request(r, priority="invoked") for r in reqs]
        return [settled(ticket) for ticket in tickets]

    def scheduler(self, max_queue: int | None = None, max_batch: int | None = None) -> Scheduler:
        """The scheduler in front of this engine: one running batch that requests join and
        leave between steps, in priority order, made by this engine's `live_batch`. It is
        created on first use (again after it was closed), with the sizes given (the
        scheduler's defaults otherwise); asking later for other sizes is an error, since every
        caller shares the one batch."""
        with self._scheduler_lock:
            if self._scheduler is None or self._scheduler.closed:  # a service closed it
                self._scheduler = Scheduler(
                    self.live_batch,
                    max_queue or MAX_QUEUE,
                    max_batch or MAX_BATCH,
                    check=self.rows.check,
                )
            s = self._scheduler
            if max_queue not in (None, s.max_queue) or max_batch not in (None, s.max_batch):
                raise ValueError(
                    f"this engine's scheduler already runs with max_queue={s.max_queue}, "
                    f"max_batch={s.max_batch}"
                )
            return s

    def close(self) -> None:
        """Stop the scheduler, if one started: queued requests fail, running ones stop."""
        with self._scheduler_lock:
            scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.close()
        self.watchdog.close()

    def live_batch(self) -> LiveBatch:
        return LiveBatch(self.runner, self._lock, self.rows)

    def request(
        self,
        prefix: str,
        suffix: str,
        params: InfillParams | None = None,
        plan: SpanPlanLike | None = None,
        cancel: threading.Event | None = None,
    ) -> InfillRequest:
        return self.requests(prefix, suffix, [params or DEFAULT_PARAMS], plan, cancel)[0]

    def requests(
        self,
        prefix: str,
        suffix: str,
        params: Sequence[InfillParams],
        plan: SpanPlanLike | None = None,
        cancel: threading.Event | None = None,
        ids: tuple[Sequence[int], Sequence[int]] | None = None,
    ) -> list[InfillRequest]:
        """Encode a hole once, for one request per params (say, several span lengths); `ids`
        are prefix and suffix already encoded by the caller (the language server's context),
        and then nothing is encoded here.

        The span is the params' int, else the plan's, else the line/indent heuristic; the plan
        also brings the construct's stop rule and the most the span may grow to."""
        spans = [initial_span(p, plan, prefix, suffix) for p in params]
        room = self.args.max_positions - max(spans, default=0)
        if ids is None:  # text of any length: trimmed here, once, beside the longest span
            pre, suf = trim_context(self.encode(prefix), self.encode(suffix), room)
            prefix_ids, suffix_ids = tuple(pre), tuple(suf)
        else:  # a context cut to budgets that fit (hole.prepare): checked, never trimmed
            prefix_ids, suffix_ids = tuple(ids[0]), tuple(ids[1])
            if room >= 0:  # (a span past the positions is the row's error to name)
                fit_context(prefix_ids, suffix_ids, room)
        out = []
        for p, span in zip(params, spans, strict=True):
            grows = plan is not None or p.expand
            cap = plan.max_span if plan is not None else p.max_span
            out.append(
                InfillRequest(
                    prefix_ids,
                    suffix_ids,
                    span,
                    p,
                    cancel,
                    stop=plan.stop if plan is not None else None,
                    max_span=span_reach(span, cap, p.max_span) if grows else span,
                )
            )
        return out

    def run(
        self, requests: Sequence[InfillRequest], observer: Observer | None = None
    ) -> list[InfillResult]:
        """Decode encoded holes together until each one ends: a live batch of their own, the
        scheduler's stepping without its queue (no request joins later); `observer` sees every
        step. Raises the first error that failed a request alone."""
        batch = self.live_batch()
        try:
            for i, r in enumerate(requests):
                batch.join(i, r)
            outcomes: dict[int, InfillResult | Exception] = {}
            while len(batch):
                outcomes.update(batch.step(observer))
        except BaseException:
            batch.fail()  # the cache goes with the rows
            raise
        out = [outcomes[i] for i in range(len(requests))]
        for outcome in out:
            if isinstance(outcome, Exception):
                raise outcome
        return [o for o in out if isinstance(o, InfillResult)]

    def refine(
        self,
        prefix: str,
        text: str,
        suffix: str,
        fraction: float = 0.25,
        params: InfillParams | None = None,
        cancel: threading.Event | None = None,
    ) -> RefineResult:
        """Edit `text` in place: remask its least likely tokens and predict them again
        (`remask`, then its request on this engine's scheduler).

        The re-prediction is a row of the scheduler's running batch, at the priority of a
        command: completions join and leave beside it step by step instead of waiting for it.
        Only the scoring pass holds the engine for itself, as a step."""
        remask = self.remask(prefix, text, suffix, fraction=fraction, params=params, cancel=cancel)
        ticket = self.scheduler().submit_request(remask.request, priority="command")
        return remask.result(settled(ticket))

    def remask(
        self,
        prefix: str,
        text: str,
        suffix: str,
        *,
        fraction: float,
        params: InfillParams | None,
        cancel: threading.Event | None,
    ) -> Remask:
        """A refine's scoring pass: its request, whose fill is `text` with its least likely
        tokens masked, to run on a scheduler (`Remask.result` reads the refine off its result).

        One full pass scores every token of `text` in its context; the `fraction` with the lowest
        probability of being what they are become masks, and the block loop re-predicts only
        those. The rest of the text stays as the user wrote it. No autoregressive model can do
        this edit: it needs the suffix and the text's own later tokens at once."""
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
        ids = self.encode(text)
        if not ids:
            raise ValueError("nothing to refine: the text is empty")
        base = params or DEFAULT_PARAMS
        # No end token may land inside: the end rule would erase the user's text after it.
        n_ids = len(ids)
        p = replace(
            base, span=n_ids, max_span=max(base.max_span, n_ids), min_tokens=n_ids, expand=False
        )
        room = self.args.max_positions - n_ids  # the context as sent: trimmed once, here
        pre, suf = trim_context(self.encode(prefix), self.encode(suffix), room)
        request = InfillRequest(tuple(pre), tuple(suf), n_ids, p, cancel, fill=tuple(ids))
        row = self.rows.row(request)
        lo, hi = row.span_start, row.span_end
        with self._lock, torch.inference_mode():
            logp = torch.log_softmax(self.logits(row.canvas[None])[0, lo:hi], dim=-1)
            mine = logp.gather(1, row.canvas[lo:hi, None].to(logp.device))[:, 0]
        n = max(1, round(fraction * n_ids))
        worst = sorted(int(i) for i in torch.topk(-mine, n).indices.tolist())
        fill = list(ids)
        for i in worst:
            fill[i] = self.mask_id
        return Remask(replace(request, fill=tuple(fill)), tuple(ids), tuple(worst))

    def encode(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise ValueError("this engine has no tokenizer; use run() with token ids")
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def decode_ids(self, ids: Sequence[int]) -> str:
        if self.tokenizer is None or not ids:
            return ""
        return str(self.tokenizer.decode(list(ids), clean_up_tokenization_spaces=False))

    # -- internals ------------------------------------------------------------------------------
    def _as_request(self, r: RequestLike) -> InfillRequest:
        if isinstance(r, InfillRequest):
            return r
        if len(r) == 2:
            return self.request(r[0], r[1])
        if len(r) == 3:
            return self.request(r[0], r[1], r[2])
        raise ValueError(f"a request is (prefix, suffix[, params]); got {len(r)} items")
