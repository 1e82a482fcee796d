"""The in-process engine as an `EngineClient` (engine_client.py): a hole is planned here
(infill_engine/planner/), its context cut to the plan's budgets and tokenized once (context.py),
and its candidate fills go through the engine's scheduler (infill_engine/scheduler.py), the same
one the engine service uses; a refine runs on a thread of its own. Loading the engine is the
backend's (backend.py). This module imports no torch itself: the engine it is given has.

Requests join one running batch between steps, in priority order (invoked, automatic,
command), so a command never holds up a completion and two fills share passes. Cancellation is
cooperative twice over: asyncio cancels the awaiting handler, and the handler sets the
request's `threading.Event`, which the scheduler drops from the queue or the batch before its
next step; how such a fill ended is still recorded, once it has.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from infill_engine import planner
from infill_engine.context import Context, Tokens, build_context, tokenize_with
from infill_engine.params import InfillResult, RefineResult
from infill_engine.scheduler import Cancelled, SchedulerError
from infill_engine.service.native import NativeAsk, Prepared, prepare

from .engine_client import Filled, Hole, Ledger, NotReady, Refinement, Superseded

if TYPE_CHECKING:
    from infill_engine.engine import Engine


class LocalEngineClient:
    """One loaded `Engine`; its calls are counted in `ledger`."""

    def __init__(self, engine: Engine, ledger: Ledger) -> None:
        self.engine = engine
        self.ledger = ledger
        self._tasks: set[asyncio.Future[None]] = set()  # recording cancelled fills' outcomes

    @property
    def positions(self) -> int:
        return int(self.engine.args.max_positions)

    def close(self) -> None:
        self.engine.close()  # its queued and running fills end now ("cancelled")

    def status(self) -> dict[str, Any]:
        e = self.engine
        return {"device": str(e.device), "dtype": str(e.dtype).removeprefix("torch.")}

    # -- what the engine service does on its side (service/native.py) ----------------------------
    def plan(self, hole: Hole) -> planner.SpanPlan:
        """The planner's view of the hole: span, growth, stop rule, budgets."""
        engine, p = self.engine, hole.params
        return planner.plan(
            hole.text,
            hole.offset,
            hole.language_id,
            engine.encode,
            end=hole.end,
            tree=hole.tree,
            max_positions=engine.args.max_positions,
            prefix_tokens=hole.prefix_tokens,
            suffix_tokens=hole.suffix_tokens,
            max_span=p.max_span,
            block_size=p.block_size,
        )

    def context(self, text: str, offset: int, after: int, plan: planner.SpanPlan) -> Context:
        """The context around [offset, after) of text, cut to the plan's budgets, tokenized
        once: its ids are the request's. A selection's own text is not context."""
        joined = text if after == offset else text[:offset] + text[after:]
        return build_context(joined, offset, self.tokenize, plan.prefix_tokens, plan.suffix_tokens)

    def tokenize(self, text: str) -> Tokens:
        tokenizer = self.engine.tokenizer
        if tokenizer is None:
            raise NotReady("the model has no tokenizer")
        return tokenize_with(tokenizer, text)

    def prepare(self, hole: Hole) -> Prepared:
        """Plan, cut, and one request per candidate span: the engine service's own steps
        (service/native.py), with the document's tree. The context's `suffix_end` is in the
        hole's text, past a selection."""
        ask = NativeAsk(
            text=hole.text,
            offset=hole.offset,
            end=hole.end,
            language_id=hole.language_id,
            priority=hole.priority,
            candidates=hole.candidates,
            prefix_tokens=hole.prefix_tokens,
            suffix_tokens=hole.suffix_tokens,
            params=hole.params,
            deadline_ms=None,
            extra=hole.extra,
            extra_tokens=hole.extra_tokens,
            drafts=hole.drafts,
            drafting=hole.drafting,
        )
        return prepare(self.engine, ask, hole.cancel, tree=hole.tree)

    # -- calls -------------------------------------------------------------------------------------
    async def fill(self, hole: Hole) -> Filled:
        """Planned, cut and encoded on the loop (the context's ids: nothing to encode again),
        decoded as one batch."""
        cancel = hole.cancel
        with self.ledger.call(cancel):
            t0 = time.perf_counter()
            scheduler = self.engine.scheduler()
            try:
                if cancel.is_set():
                    raise Superseded
                prepared = self.prepare(hole)
                plan, ctx, requests = prepared.plan, prepared.context, prepared.requests
                tickets = [scheduler.submit_request(r, priority=hole.priority) for r in requests]
                # shielded: a cancelled handler must not cancel the tickets' futures, whose
                # results (stop_reason "cancelled") the counters still record
                waits = [asyncio.wrap_future(t.future) for t in tickets]
                try:
                    # gather retrieves every outcome, so none is logged as never retrieved
                    results = list(await asyncio.gather(*(asyncio.shield(w) for w in waits)))
                except asyncio.CancelledError:
                    cancel.set()  # queued: never starts; running: leaves at its next step
                    for t in tickets:
                        scheduler.cancel(t)
                    task = asyncio.ensure_future(self._record_later(waits, t0))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                    raise
            except Cancelled:
                raise Superseded from None  # superseded while it queued: no model call at all
            except SchedulerError as e:  # busy, deadline: the server logs it, no completion
                raise RuntimeError(f"engine: {e}") from None
        files, n = (ctx.extra.files, len(ctx.extra.ids)) if ctx.extra is not None else ((), 0)
        more = {"extra_files": list(files), "extra_tokens": n}
        self.ledger.record(results, (time.perf_counter() - t0) * 1000, kind=plan.kind, **more)
        return Filled(
            results,
            plan.kind,
            plan.span,
            ctx.prefix_start,
            ctx.suffix_end,
            files,
            n,
            tuple(prepared.drafts),
        )

    async def _record_later(self, waits: list[asyncio.Future[InfillResult]], t0: float) -> None:
        """Record how a fill whose handler was cancelled ended (it stops at its next step)."""
        results = []
        for w in waits:
            try:
                results.append(await w)
            except Exception:  # cancelled while queued, or failed: no pass to count
                continue
        if results:
            self.ledger.record(results, (time.perf_counter() - t0) * 1000)

    async def refine(self, job: Refinement) -> RefineResult:
        engine, cancel = self.engine, job.cancel
        selection = Hole(
            job.text, job.start, job.end, job.language_id, "command", 1,
            job.prefix_tokens, job.suffix_tokens, job.params, cancel,
        )  # fmt: skip
        ctx = self.context(job.text, job.start, job.end, self.plan(selection))  # its budgets
        old = job.text[job.start : job.end]

        def work() -> RefineResult:
            # One scoring pass, then a row of the engine's running batch at command priority
            # (Engine.refine): this thread only waits for it.
            t0 = time.perf_counter()
            result = engine.refine(ctx.prefix, old, ctx.suffix, job.fraction, job.params, cancel)
            self.ledger.record(result, (time.perf_counter() - t0) * 1000)
            return result

        with self.ledger.call(cancel):
            try:
                return await asyncio.to_thread(work)
            except asyncio.CancelledError:
                cancel.set()  # the row leaves at its next step; its result is dropped
                raise
