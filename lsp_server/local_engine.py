"""The in-process engine as an `EngineClient` (engine_client.py): every fill goes through the
engine's scheduler (infill_engine/scheduler.py), the same one the engine service uses, and a
refine runs on a thread of its own. Loading the engine is the backend's (backend.py).

Requests join one running batch between steps, in priority order (invoked, automatic,
command), so a command never holds up a completion and two fills share passes. Cancellation is
cooperative twice over: asyncio cancels the awaiting handler, and the handler sets the
request's `threading.Event`, which the scheduler drops from the queue or the batch before its
next step; how such a fill ended is still recorded, once it has.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from infill_engine import Engine, InfillResult
from infill_engine.engine import RefineResult
from infill_engine.scheduler import Cancelled, SchedulerError

from .engine_client import Fill, Ledger, Refinement, Superseded


class LocalEngineClient:
    """One loaded `Engine`; its calls are counted in `ledger`."""

    def __init__(self, engine: Engine, ledger: Ledger) -> None:
        self.engine = engine
        self.ledger = ledger
        self._tasks: set[asyncio.Future[None]] = set()  # recording cancelled fills' outcomes

    def close(self) -> None:
        self.engine.close()  # its queued and running fills end now ("cancelled")

    def status(self) -> dict[str, Any]:
        e = self.engine
        return {"device": str(e.device), "dtype": str(e.dtype).removeprefix("torch.")}

    async def infill_many(self, fill: Fill) -> list[InfillResult]:
        """Encoded once, decoded as one batch; `ids` spare the encoding."""
        engine, cancel, ids = self.engine, fill.cancel, fill.ids
        args = (fill.prefix, fill.suffix, fill.params, fill.plan, cancel)
        with self.ledger.call(cancel):
            t0 = time.perf_counter()
            scheduler = engine.scheduler()
            try:
                if cancel.is_set():
                    raise Superseded
                if ids is None:  # encoded off the event loop (a long document takes ms)
                    requests = await asyncio.to_thread(engine.requests, *args)
                else:  # the context's ids: nothing to encode, no thread to hand over to
                    requests = engine.requests(*args, ids)
                tickets = [scheduler.submit_request(r, priority=fill.priority) for r in requests]
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
        self.ledger.record(results, (time.perf_counter() - t0) * 1000)
        return results

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

        def work() -> RefineResult:
            # One scoring pass, then a row of the engine's running batch at command priority
            # (Engine.refine): this thread only waits for it.
            t0 = time.perf_counter()
            result = engine.refine(
                job.prefix, job.text, job.suffix, job.fraction, job.params, cancel
            )
            self.ledger.record(result, (time.perf_counter() - t0) * 1000)
            return result

        with self.ledger.call(cancel):
            try:
                return await asyncio.to_thread(work)
            except asyncio.CancelledError:
                cancel.set()  # the row leaves at its next step; its result is dropped
                raise
