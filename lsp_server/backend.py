"""The engine behind the server: loads it in the background, runs every model call on one worker
thread (off the event loop), makes those calls cancellable, and keeps the counters that
`dllm/status` reports.

A load runs on the same worker and cannot be stopped once it has started; the server coalesces
reloads so that a burst of settings changes queues at most one. Loading drops the old engine
first, so two models never share the memory.

Cancellation is cooperative twice over: asyncio cancels the awaiting handler, and the handler
sets the request's `threading.Event`, which the engine's block loop checks before every pass.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypeVar

from infill_engine import Engine, InfillParams, InfillResult, load
from infill_engine.engine import RefineResult
from infill_engine.loader import ModelLoadError
from infill_engine.planner import SpanPlan

from .options import EngineOptions

State = Literal["idle", "loading", "ready", "failed"]
T = TypeVar("T")


class NotReady(Exception):
    """The model is not loaded (yet, or at all)."""


class Superseded(Exception):
    """A newer request took over before this one reached the model."""


@dataclass
class Counters:
    requests: int = 0  # engine calls asked for
    model_calls: int = 0  # engine calls that ran the model
    cancelled: int = 0  # calls whose block loop stopped on the cancel flag
    forward_passes: int = 0
    last: dict[str, Any] = field(default_factory=dict)  # the latest call's result, in brief


class Backend:
    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.state: State = "idle"
        self.error: str | None = None
        self.engine: Engine | None = None
        self.options = EngineOptions()
        self.counters = Counters()
        self.loads = 0  # model loads that ran on the worker
        self._lock = threading.Lock()
        self._running: set[threading.Event] = set()  # cancel flags of calls not yet finished
        # One thread: the engine runs one decode loop at a time anyway, and a queue of one
        # keeps a superseded request from holding the model while a newer one waits.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dllm-engine")

    # -- lifecycle --------------------------------------------------------------------------------
    async def load(self, options: EngineOptions, report: Callable[[str], None]) -> None:
        """Load the model on the worker; never raises (a failure is the `failed` state)."""
        self.state, self.error, self.options = "loading", None, options
        self.engine = None  # in-flight calls keep their own reference until they finish
        if options.address is not None:
            self.log(f"engine service {options.address!r} is not supported yet; running in-process")
        report(f"loading {options.model} on {options.device}")
        t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        try:
            engine = await loop.run_in_executor(self._pool, self._load_now, options)
        except (ModelLoadError, ValueError, RuntimeError, OSError) as e:
            self.state, self.error, self.engine = "failed", str(e), None
            return
        self.engine, self.state = engine, "ready"
        self.log(
            f"model {options.model} ready on {engine.device} ({engine.dtype}) "
            f"in {time.perf_counter() - t0:.1f}s"
        )

    def _load_now(self, options: EngineOptions) -> Engine:
        """On the worker."""
        self.loads += 1
        return load(options.model, device=options.device, dtype=options.dtype)

    def close(self) -> None:
        """Stop: queued calls never start, running ones stop at their next pass."""
        with self._lock:
            for cancel in self._running:
                cancel.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def status(self) -> dict[str, Any]:
        e = self.engine
        with self._lock:
            counters = asdict(self.counters)
        return {
            "state": self.state,
            "error": self.error,
            "model": self.options.model,
            "device": str(e.device) if e else None,
            "dtype": str(e.dtype).removeprefix("torch.") if e else None,
            "family": e.family if e else None,
            "model_threshold": e.threshold if e else None,  # τ when decode.threshold is null
            "loads": self.loads,
            **counters,
        }

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of text's tokens under the model's tokenizer (one encode)."""
        tok = self.ready_engine().tokenizer
        if tok is None:
            return [(i, i + 1) for i in range(len(text))]
        fast = getattr(tok, "backend_tokenizer", None)  # the Rust tokenizer: no wrapper cost
        if fast is not None:
            return list(fast.encode(text, add_special_tokens=False).offsets)
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        return [(int(a), int(b)) for a, b in enc["offset_mapping"]]

    # -- model calls ------------------------------------------------------------------------------
    def ready_engine(self) -> Engine:
        if self.engine is None or self.state != "ready":
            raise NotReady(self.error or f"the model is {self.state}")
        return self.engine

    async def infill(
        self,
        prefix: str,
        suffix: str,
        params: InfillParams,
        cancel: threading.Event,
        plan: SpanPlan | None = None,
    ) -> InfillResult:
        return (await self.infill_many(prefix, suffix, [params], cancel, plan))[0]

    async def infill_many(
        self,
        prefix: str,
        suffix: str,
        params: list[InfillParams],
        cancel: threading.Event,
        plan: SpanPlan | None = None,
    ) -> list[InfillResult]:
        """Several fills of one hole (say, several span lengths), encoded once and decoded as
        one batch."""
        engine = self.ready_engine()
        return await self._run(
            lambda: engine.run(engine.requests(prefix, suffix, params, plan, cancel)), cancel
        )

    async def refine(
        self,
        prefix: str,
        text: str,
        suffix: str,
        fraction: float,
        params: InfillParams,
        cancel: threading.Event,
    ) -> RefineResult:
        engine = self.ready_engine()
        return await self._run(
            lambda: engine.refine(prefix, text, suffix, fraction, params, cancel), cancel
        )

    async def _run(self, call: Callable[[], T], cancel: threading.Event) -> T:
        with self._lock:
            self.counters.requests += 1
            self._running.add(cancel)

        def work() -> T:
            if cancel.is_set():
                raise Superseded  # superseded while it queued: no model call at all
            t0 = time.perf_counter()
            result = call()
            self._record(result, (time.perf_counter() - t0) * 1000)
            return result

        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, work)
        except asyncio.CancelledError:
            cancel.set()  # the worker stops at its next pass; its result is dropped
            raise
        finally:
            with self._lock:
                self._running.discard(cancel)

    def _record(self, results: Any, call_ms: float) -> None:
        batch = results if isinstance(results, list) else [results]
        result = batch[0]
        stop = getattr(result, "stop_reason", None)
        nfe = max(int(getattr(r, "nfe", 0)) for r in batch)  # a batch's rows share passes
        with self._lock:
            c = self.counters
            c.model_calls += 1
            c.forward_passes += nfe
            c.cancelled += stop == "cancelled"
            c.last = {
                "stop_reason": stop,
                "nfe": nfe,
                "tokens": getattr(result, "tokens", None),
                "span": getattr(result, "span", None),
                "elapsed_ms": getattr(result, "elapsed_ms", None),  # the block loop alone
                "call_ms": round(call_ms, 3),  # the whole engine call, tokenization included
            }
