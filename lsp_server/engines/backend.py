"""The engine behind the server, as the one object the server talks to: which engine (loaded
here, or the engine service of `engineAddress`), how it stands (`state`, `error`), the counters
that `dllm/status` reports, and every model call, handed to the engine's client.

A load runs on a thread of its own and cannot be stopped once it has started; the server
coalesces reloads so that a burst of settings changes queues at most one. Loading closes the
old engine's client first (the in-process engine's queued and running fills end "cancelled";
the service's connection is dropped), so two models are never both in use.

The clients implement engine_client.py's `EngineClient`: in_process.py (the in-process
engine: planning, the context, its scheduler's priorities, batching, cancellation),
engine_service.py (the engine service: one `v2/infill` per hole, `cancel {id}`, reconnection
with backoff) and hosted_fim.py (an OpenAI-compatible FIM API). They do not import this
module: each gets a `Port` of its own (this backend's `Ledger`, its log, a way to say how the
engine stands), and this backend is the one writer of `state` and `error`. A client it lets go
keeps its port, shut: a reply that reaches it after a reload changes nothing here.

No secret is logged, at any level: the backend puts untrusted.py's filter on pygls' loggers and
ours when it is made (before the initialize params, `engineToken` among them, reach pygls' log),
and gives it the token and key of each engine it loads.

Next edits' model calls (`rewrite`, `verify`: infill_engine/edits/rewrite.py) run on the
in-process engine only; with an engine elsewhere they raise `Unavailable` (a `NotReady`).

With `engineAddress` nothing here imports torch or reads a model file: `load` (and with it
torch, the loader, the model) is imported only when the in-process engine loads.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from infill_engine.edits import Edit, Suggestion
from infill_engine.params import InfillParams, RefineResult, SpeculateMode
from infill_engine.scheduler import PRIORITIES, Priority

from ..options import FIM_PREFIX, EngineOptions
from .daemon import on_daemon_thread
from .engine_client import (
    Counters,
    EngineClient,
    Filled,
    Hole,
    Ledger,
    NotReady,
    Port,
    State,
    Superseded,
)
from .engine_service import RemoteEngineClient
from .hosted_fim import FimEngineClient, api_key
from .in_process import LocalEngineClient
from .link import Link, engine_token
from .untrusted import guard_logs

if TYPE_CHECKING:
    from infill_engine.engine import Engine

__all__ = ["Backend", "NotReady", "Superseded", "Unavailable"]

log = logging.getLogger("dllm-infill-ls.backend")


class Unavailable(NotReady):
    """The engine in use cannot do this: next-edit rewrites and their scores need the model in
    this process, not an engine service or a hosted API."""


class Backend:
    """The engine in use and how it stands; every model call goes through here. `engine`: an
    engine already loaded, in use from the start (`ready`), as a test or a tool injects it."""

    def __init__(
        self,
        log: Callable[[str], None],
        tell: Callable[[str], None] | None = None,
        engine: Engine | None = None,
    ) -> None:
        guard_logs()
        self.log = log
        self.tell = tell or log  # what the user must see (a lost engine service), once
        self._state: State = "idle"
        self._error: str | None = None
        self.backoff_s = (0.5, 10.0)  # reconnecting to the service: first delay, longest delay
        self.options = EngineOptions()
        self._ledger = Ledger()
        self.loads = 0  # model loads that ran on the worker
        self._port: Port | None = None  # the port of the client in use
        self._client: EngineClient | None = None
        if engine is not None:
            self._use(LocalEngineClient(engine, self._open_port()))
            self._write("ready", None)

    # -- how it stands: written here alone (the load, and the client's port) --------------------
    @property
    def state(self) -> State:
        return self._state

    @property
    def error(self) -> str | None:
        return self._error

    def _write(self, state: State, error: str | None) -> None:
        self._state, self._error = state, error

    def _open_port(self) -> Port:
        """A port for the next client; the one before it is shut."""
        if self._port is not None:
            self._port.shut()
        self._port = Port(
            self._ledger, lambda: (self._state, self._error), self._write, self.log, self.tell
        )
        return self._port

    def _use(self, client: EngineClient | None) -> None:
        """Put `client` in use; the one before it is closed (its port shut first)."""
        old, self._client = self._client, client
        if old is not None:
            old.close()

    @property
    def counters(self) -> Counters:
        return self._ledger.counters

    @property
    def client(self) -> EngineClient | None:
        """The client of the engine in use."""
        return self._client

    @property
    def engine(self) -> Engine | None:
        """The in-process engine, when that is the one in use."""
        client = self._client
        return client.engine if isinstance(client, LocalEngineClient) else None

    @property
    def remote(self) -> Link | None:
        """The engine service's connection (engineAddress)."""
        client = self._client
        return client.remote if isinstance(client, RemoteEngineClient) else None

    # -- lifecycle --------------------------------------------------------------------------------
    async def load(self, options: EngineOptions, report: Callable[[str], None]) -> None:
        """Load the model on the worker; never raises (a failure is the `failed` state)."""
        port = self._open_port()  # the old client's reports change nothing from here on
        self._use(None)
        self.options = options
        guard_logs([options.token, engine_token(None), api_key(options)])
        self._write("loading", None)
        if options.address is not None:
            kind = FimEngineClient if options.address.startswith(FIM_PREFIX) else RemoteEngineClient
            service = kind(port, options, self.backoff_s)
            self._use(service)
            await service.connect(report)
            return
        report(f"loading {options.model} on {options.device}")
        t0 = time.perf_counter()
        try:
            loop = asyncio.get_running_loop()

            def progress(message: str) -> None:  # called on the download's thread
                loop.call_soon_threadsafe(report, message)

            engine = await on_daemon_thread(self._load_now, options, progress, name="dllm-load")
        except Exception as e:  # any failure, a corrupt file's own error type included
            from infill_engine.loader import ModelLoadError  # loaded by now: no new import

            if isinstance(e, ModelLoadError):
                error = str(e)  # says what is wrong with the directory
            else:
                error = f"{type(e).__name__}: {e}"
                log.error("loading %s failed", options.model, exc_info=e)
            port.failed(error)
            return
        if not port.open:  # closed (or loaded again) meanwhile: this engine is not wanted
            engine.close()
            return
        self._use(LocalEngineClient(engine, port))
        port.ready(
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
        if self._port is not None:
            self._port.shut()
        client = self._client
        if client is not None:
            client.close()

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
        client = self._client
        if client is not None:
            out.update(client.status())
        return out

    @property
    def positions(self) -> int | None:
        """The positions of the model in use, when known: the settings are clamped to them."""
        client = self._client if self.state == "ready" else None
        return client.positions if client is not None else None

    # -- model calls ------------------------------------------------------------------------------
    def _ready_client(self) -> EngineClient:
        if self.state != "ready":
            raise NotReady(self.error or f"the model is {self.state}")
        client = self._client
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

    async def refine(self, hole: Hole, fraction: float) -> RefineResult:
        """Remask `fraction` of the selection [hole.offset, hole.end) and decode it again."""
        if hole.end is None or hole.end <= hole.offset:
            raise ValueError("refine needs a selection: a hole with an end past its offset")
        return await self._ready_client().refine(hole, fraction)

    @property
    def rewrites(self) -> bool:
        """Whether the engine in use can rewrite a region and score candidates (next edits):
        the in-process engine, loaded."""
        return self.state == "ready" and isinstance(self._client, LocalEngineClient)

    def _local(self, what: str) -> LocalEngineClient:
        client = self._ready_client()
        if not isinstance(client, LocalEngineClient):
            raise Unavailable(f"{what} needs the model in process; the engine in use is elsewhere")
        return client

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
        """The model's next edit: the region around `cursor` of `text` (around [cursor, end],
        a candidate's span) rewritten with the document's recent `edits` in the prompt, as the
        smallest replacement (kind "model", scored by verify); None when the model changes
        nothing, empties the region, or `cancel` stopped it (`Superseded`: set before it began).
        `Unavailable` for an engine elsewhere; ValueError for lines too long for the model."""
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {list(PRIORITIES)}, got {priority!r}")
        if not 0 <= cursor <= (cursor if end is None else end) <= len(text):
            raise ValueError(f"the span [{cursor}, {end}] is outside the text")
        client = self._local("a next-edit rewrite")
        return await client.rewrite(
            text,
            cursor,
            edits,
            language_id,
            end=end,
            params=params,
            speculate=speculate,
            cancel=cancel,
            priority=priority,
        )

    async def verify(
        self,
        text: str,
        suggestions: Sequence[Suggestion],
        edits: Sequence[Edit] = (),
        language_id: str = "plaintext",
    ) -> list[float]:
        """The model's agreement with each suggestion, 0 to 1 (one batched pass): for the gate
        to read, never a reason to show the model's own text. `Unavailable` for an engine
        elsewhere."""
        return await self._local("scoring next edits").verify(text, suggestions, edits, language_id)


def _weights_mib(engine: Engine) -> float:
    """The in-process engine's weight memory (torch is loaded: the engine is)."""
    from infill_engine.quantize import weight_bytes

    return round(weight_bytes(engine.model) / 2**20, 1)
