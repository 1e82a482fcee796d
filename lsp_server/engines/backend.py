"""The engine behind the server, as the one object the server talks to: which engine (loaded
here, or the engine service of `engineAddress`), how it stands (`state`, `error`), the counters
that `dllm/status` reports, and every model call, handed to the engine's client.

A load runs on a thread of its own and cannot be stopped once it has started; the server
coalesces reloads so that a burst of settings changes queues at most one. Loading closes the
old engine's client first (the in-process engine's queued and running fills end "cancelled";
the service's connection is dropped), so two models are never both in use.

The clients implement engine_client.py's `EngineClient`: local_engine.py (the in-process
engine: planning, the context, its scheduler's priorities, batching, cancellation) and
remote_engine.py (the engine service: one `v2/infill` per hole, `cancel {id}`, reconnection
with backoff). They share this backend's `Ledger` and do not import this module.

With `engineAddress` nothing here imports torch or reads a model file: `load` (and with it
torch, the loader, the model) is imported only when the in-process engine loads.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from infill_engine.params import RefineResult
from infill_engine.scheduler import PRIORITIES

from ..options import FIM_PREFIX, EngineOptions
from .engine_client import (
    Counters,
    EngineClient,
    Filled,
    Hole,
    Ledger,
    NotReady,
    Refinement,
    State,
    Superseded,
)
from .fim_remote import FimEngineClient
from .local_engine import LocalEngineClient
from .remote import Link
from .remote_engine import RemoteEngineClient

if TYPE_CHECKING:
    from infill_engine.engine import Engine

__all__ = ["Backend", "NotReady", "Superseded"]

log = logging.getLogger("dllm-infill-ls.backend")


class Backend:
    """The engine in use and how it stands; every model call goes through here."""

    def __init__(
        self, log: Callable[[str], None], tell: Callable[[str], None] | None = None
    ) -> None:
        self.log = log
        self.tell = tell or log  # what the user must see (a lost engine service), once
        self.state: State = "idle"
        self.error: str | None = None
        self.engine: Engine | None = None  # the in-process engine
        self.backoff_s = (0.5, 10.0)  # reconnecting to the service: first delay, longest delay
        self.options = EngineOptions()
        self._ledger = Ledger()
        self.loads = 0  # model loads that ran on the worker
        self._local: LocalEngineClient | None = None  # the client of the in-process engine
        # with engineAddress: the engine service, or an OpenAI-compatible API (openai+URL)
        self._service: RemoteEngineClient | FimEngineClient | None = None

    @property
    def counters(self) -> Counters:
        return self._ledger.counters

    @property
    def remote(self) -> Link | None:
        """The engine service's connection (engineAddress)."""
        return self._service.remote if self._service is not None else None

    # -- lifecycle --------------------------------------------------------------------------------
    async def load(self, options: EngineOptions, report: Callable[[str], None]) -> None:
        """Load the model on the worker; never raises (a failure is the `failed` state)."""
        self.state, self.error, self.options = "loading", None, options
        old = self._client()
        self.engine, self._local, self._service = None, None, None
        if old is not None:
            old.close()
        if options.address is not None:
            client = (
                FimEngineClient if options.address.startswith(FIM_PREFIX) else RemoteEngineClient
            )
            self._service = client(self, options, self._ledger, self.backoff_s)
            await self._service.connect(report)
            return
        report(f"loading {options.model} on {options.device}")
        t0 = time.perf_counter()
        try:
            loop = asyncio.get_running_loop()

            def progress(message: str) -> None:  # called on the download's thread
                loop.call_soon_threadsafe(report, message)

            engine = await asyncio.to_thread(self._load_now, options, progress)
        except Exception as e:  # any failure, a corrupt file's own error type included
            from infill_engine.loader import ModelLoadError  # loaded by now: no new import

            if isinstance(e, ModelLoadError):
                self.error = str(e)  # says what is wrong with the directory
            else:
                self.error = f"{type(e).__name__}: {e}"
                log.error("loading %s failed", options.model, exc_info=e)
            self.state, self.engine = "failed", None
            return
        self.engine, self.state = engine, "ready"
        self.log(
            f"model {options.model} ready on {engine.device} ({engine.dtype}) "
            f"in {time.perf_counter() - t0:.1f}s"
        )

    def _load_now(self, options: EngineOptions, progress: Callable[[str], None]) -> Engine:
        """On a thread of its own; the first in-process load imports torch. A Hub name
        downloads first, its byte counts reported as work-done progress."""
        from infill_engine import load
        from infill_engine.loader import resolve_model_dir

        self.loads += 1
        model = str(resolve_model_dir(options.model, progress))
        return load(model, device=options.device, dtype=options.dtype, quantize=options.quantize)

    def close(self) -> None:
        """Stop: queued calls never start, running ones stop at their next pass."""
        self._ledger.cancel_all()
        client = self._client()
        if client is not None:
            client.close()

    def _client(self) -> EngineClient | None:
        """The client of the engine in use: the service's, else the in-process engine's."""
        if self._service is not None:
            return self._service
        engine = self.engine
        if engine is None:
            return None
        if self._local is None or self._local.engine is not engine:
            self._local = LocalEngineClient(engine, self._ledger)
        return self._local

    def status(self) -> dict[str, Any]:
        e = self.engine
        out: dict[str, Any] = {
            "state": self.state,
            "error": self.error,
            "model": self.options.model,
            "device": None,  # the in-process engine's
            "dtype": None,
            "family": e.family if e else None,
            "model_threshold": e.threshold if e else None,  # τ when decode.threshold is null
            "quantize": self.options.quantize if e else None,
            "weights_mib": _weights_mib(e) if e else None,  # int8/int4 shrink it (quantize.py)
            "loads": self.loads,
            "torch_loaded": "torch" in sys.modules,  # never, with engineAddress
            **self._ledger.snapshot(),
        }
        client = self._client()
        if client is not None:
            out.update(client.status())
        return out

    @property
    def positions(self) -> int | None:
        """The positions of the model in use, when known: the settings are clamped to them."""
        client = self._client() if self.state == "ready" else None
        return client.positions if client is not None else None

    # -- model calls ------------------------------------------------------------------------------
    def _ready_client(self) -> EngineClient:
        if self.state != "ready":
            raise NotReady(self.error or f"the model is {self.state}")
        client = self._client()
        if client is None:
            raise NotReady(self.error or "the engine service is not connected")
        return client

    async def fill(self, hole: Hole) -> Filled:
        """Plan and fill a hole: `hole.candidates` fills, decoded as one batch (in the service
        too). `hole.priority` is the caller's to say (`invoked`, `automatic`, `command`): it is
        never guessed from the request's shape."""
        if hole.priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {list(PRIORITIES)}, got {hole.priority!r}")
        return await self._ready_client().fill(hole)

    async def refine(self, job: Refinement) -> RefineResult:
        return await self._ready_client().refine(job)


def _weights_mib(engine: Engine) -> float:
    """The in-process engine's weight memory (torch is loaded: the engine is)."""
    from infill_engine.quantize import weight_bytes

    return round(weight_bytes(engine.model) / 2**20, 1)
