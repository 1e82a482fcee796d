"""The in-process engine as an `EngineClient` (engine_client.py): a hole is planned, its context
cut to the plan's budgets and tokenized once by the engine's one `prepare` (infill_engine/hole.py,
the engine service's too), and its candidate fills go through the engine's scheduler
(infill_engine/scheduler.py), the same one the engine service uses; a refine is the service's
too (service/refine.py: the same hole, the same cut), on a thread of its own. Loading the
engine is the backend's (backend.py). This module imports no torch itself: the engine it is
given has. Planning runs on a thread of its own (dllm-plan), off the event loop.

Requests join one running batch between steps, in priority order (invoked, automatic,
command), so a command never holds up a completion and two fills share passes. Cancellation is
cooperative twice over: asyncio cancels the awaiting handler, and the handler sets the
request's `threading.Event`, which the scheduler drops from the queue or the batch before its
next step; how such a fill ended is still recorded, once it has.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from infill_engine.edits import Edit, Suggestion
from infill_engine.edits.rewrite import Rewrite, rewrite, verify
from infill_engine.hole import Prepared, prepare
from infill_engine.params import InfillParams, InfillResult, RefineResult, SpeculateMode
from infill_engine.scheduler import Cancelled, Priority, SchedulerError
from infill_engine.service.refine import RefineAsk, refine

from .engine_client import Filled, Hole, Port, Superseded

if TYPE_CHECKING:
    from infill_engine.engine import Engine


class LocalEngineClient:
    """One loaded `Engine`; its calls are counted in the ledger of `port`."""

    def __init__(self, engine: Engine, port: Port) -> None:
        self.engine = engine
        self.port = port  # nothing to report: an engine in process stands as long as it is loaded
        self.ledger = port.ledger
        self._tasks: set[asyncio.Future[None]] = set()  # recording cancelled fills' outcomes
        # plans, one at a time, off the event loop (as the service's encoding thread)
        self._plans = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dllm-plan")

    @property
    def positions(self) -> int:
        return int(self.engine.args.max_positions)

    def close(self) -> None:
        self._plans.shutdown(wait=False, cancel_futures=True)
        self.engine.close()  # its queued and running fills end now ("cancelled")

    def status(self) -> dict[str, Any]:
        e = self.engine
        return {"device": str(e.device), "dtype": str(e.dtype).removeprefix("torch.")}

    def prepare(self, hole: Hole) -> Prepared:
        """Plan, cut, and one request per candidate span: the engine service's own steps
        (hole.prepare), with the document's tree. The context's `suffix_end` is in the hole's
        text, past a selection."""
        return prepare(self.engine, hole)

    # -- calls -------------------------------------------------------------------------------------
    async def fill(self, hole: Hole) -> Filled:
        """Planned, cut and encoded on the planning thread (the context's ids: nothing to encode
        again), decoded as one batch."""
        cancel = hole.cancel
        with self.ledger.call(cancel):
            t0 = time.perf_counter()
            scheduler = self.engine.scheduler()
            try:
                if cancel.is_set():
                    raise Superseded
                # Off the loop: a large document's plan and drafts take a second of Python, and
                # the loop reads didChange and cancel meanwhile. The tree goes as a copy, since
                # didChange edits the document's own in place.
                mine = hole if hole.tree is None else replace(hole, tree=hole.tree.copy())
                loop = asyncio.get_running_loop()
                prepared = await loop.run_in_executor(self._plans, self.prepare, mine)
                if cancel.is_set():
                    raise Superseded  # a newer request came while it was planned
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

    async def refine(self, hole: Hole, fraction: float) -> RefineResult:
        """Cut as the service cuts (service/refine.py: the hole's context planned and tokenized
        by `prepare`), then one scoring pass and a row of the engine's running batch at command
        priority (Engine.refine); this client's thread only waits for it."""
        engine, cancel = self.engine, hole.cancel
        ask = RefineAsk(hole, fraction)

        def work() -> RefineResult:
            t0 = time.perf_counter()
            result = refine(engine, ask)
            self.ledger.record(result, (time.perf_counter() - t0) * 1000)
            return result

        with self.ledger.call(cancel):
            try:
                return await asyncio.to_thread(work)
            except asyncio.CancelledError:
                cancel.set()  # the row leaves at its next step; its result is dropped
                raise

    async def rewrite(
        self,
        text: str,
        cursor: int,
        edits: Sequence[Edit],
        language_id: str,
        *,
        end: int | None = None,
        params: InfillParams | None = None,
        speculate: SpeculateMode | None = None,
        cancel: threading.Event | None = None,
        priority: Priority = "automatic",
    ) -> Suggestion | None:
        """The region around the cursor rewritten (infill_engine/edits/rewrite.py) as a row of
        the engine's running batch at `priority`; this client's thread only waits for it. None:
        no change, or `cancel` stopped it while it ran; `Superseded`: set before it started."""
        engine, flag = self.engine, cancel or threading.Event()
        mine = tuple(edits)

        def work() -> Rewrite:
            t0 = time.perf_counter()
            done = rewrite(
                engine,
                text,
                cursor,
                mine,
                language_id,
                end=end,
                params=params,
                speculate=speculate,
                cancel=flag,
                priority=priority,
            )
            self.ledger.record(done.result, (time.perf_counter() - t0) * 1000, kind="rewrite")
            return done

        with self.ledger.call(flag):
            if flag.is_set():
                raise Superseded
            try:
                done = await asyncio.to_thread(work)
            except asyncio.CancelledError:
                flag.set()  # the row leaves at its next step; its result is dropped
                raise
            except Cancelled:
                raise Superseded from None
            except SchedulerError as e:
                raise RuntimeError(f"engine: {e}") from None
        return done.suggestion

    async def verify(
        self,
        text: str,
        suggestions: Sequence[Suggestion],
        edits: Sequence[Edit],
        language_id: str,
    ) -> list[float]:
        """The model's agreement with each suggestion, 0 to 1, in one scoring pass that holds the
        engine between two of its steps (rewrite.verify), on a thread of its own."""
        if not suggestions:
            return []
        found, mine = tuple(suggestions), tuple(edits)
        return await asyncio.to_thread(verify, self.engine, text, found, mine, language_id)
