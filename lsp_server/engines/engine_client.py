"""What the language server asks of an engine, wherever it runs: the `EngineClient` protocol, the
two errors a call may end in (`NotReady`, `Superseded`), the one `Ledger` of the calls that
every client writes to and `dllm/status` reads (counters, cancel flags of calls in flight), and
the `Port` through which a client reports how its engine stands.

A call names a hole in a document (`Hole`, the engine's one hole, infill_engine/hole.py: the
text, the cursor or a selection, the budgets, the settings, the cancel flag), not a prefix and a
suffix: the engine plans the span, cuts the context to the budgets and tokenizes it
(hole.prepare), so a client that has no tokenizer (the engine service's) asks the same question
as the in-process one, in the same object. The answer (`Filled`) says which part of the text
the model saw. A refine names a hole too (the selection), and is cut the same way on either side.

Three clients implement the protocol: the in-process engine (in_process.py), the engine
service (engine_service.py) and an OpenAI-compatible FIM API (hosted_fim.py). backend.py holds
one of them at a time and is the one writer of how it stands (`state`, `error`): a client
reports through the `Port` the backend handed it, and imports no backend. Nothing here imports
torch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from infill_engine.drafts import Draft
from infill_engine.hole import Hole
from infill_engine.params import InfillResult, RefineResult

__all__ = ["EngineClient", "Filled", "Hole", "Ledger", "NotReady", "Port", "Superseded"]

State = Literal["idle", "loading", "ready", "failed"]


class NotReady(Exception):
    """The model is not loaded (yet, or at all)."""


class Superseded(Exception):
    """A newer request took over before this one reached the model."""


@dataclass(frozen=True)
class Filled:
    """The fills of a hole, one per candidate span, and the context the model saw around them:
    `text[start:offset]` before and `text[hole.after:stop]` after, in the hole's text, and
    before them the other files' chunks kept (their paths, their tokens); and the drafts for
    the cursor, best first."""

    results: list[InfillResult]
    kind: str  # the planned hole kind (planner.kinds)
    span: int  # the planned span, in tokens
    start: int
    stop: int
    extra: tuple[str, ...] = ()
    extra_tokens: int = 0
    drafts: tuple[Draft, ...] = ()

    def context(self, hole: Hole) -> tuple[str, str]:
        """(prefix, suffix) as the model saw them: what infill_engine/finish checks a fill
        against."""
        return hole.text[self.start : hole.offset], hole.text[hole.after : self.stop]


class EngineClient(Protocol):
    """One engine, in this process or behind a service. A set `cancel` flag (or a cancelled
    caller) stops a call: `Superseded` when it had not reached the model yet."""

    async def fill(self, hole: Hole) -> Filled: ...

    async def refine(self, hole: Hole, fraction: float) -> RefineResult:
        """Remask `fraction` of the selection [hole.offset, hole.end) and decode it again, the
        context around it cut to the hole's budgets as a fill's is (service/refine.py)."""

    def close(self) -> None:
        """Queued calls never start, running ones stop at their next pass."""

    def status(self) -> dict[str, Any]:
        """The fields this client adds to `dllm/status`."""

    @property
    def positions(self) -> int | None:
        """The model's positions (context + span), when known: settings are clamped to it."""


@dataclass
class Counters:
    requests: int = 0  # engine calls asked for
    model_calls: int = 0  # engine calls that ran the model
    cancelled: int = 0  # calls whose block loop stopped on the cancel flag
    forward_passes: int = 0
    last: dict[str, Any] = field(default_factory=dict)  # the latest call's result, in brief


class Ledger:
    """The counters, and the cancel flags of the calls not yet finished; thread-safe (a refine
    records its result on its own thread)."""

    def __init__(self) -> None:
        self.counters = Counters()
        self._lock = threading.Lock()
        self._running: set[threading.Event] = set()

    @contextmanager
    def call(self, cancel: threading.Event) -> Iterator[None]:
        """A model call, from start to finish: counted, and its cancel flag set by
        `cancel_all` while it runs."""
        with self._lock:
            self.counters.requests += 1
            self._running.add(cancel)
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(cancel)

    def cancel_all(self) -> None:
        """The server closes: every call in flight stops."""
        with self._lock:
            for cancel in self._running:
                cancel.set()

    def record(self, results: Any, call_ms: float, **more: Any) -> None:
        """A call that ran the model: its result (or a batch's), and `more` facts of it."""
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
                **more,
            }

    def superseded(self) -> None:
        """A call the engine dropped before it ran (the service's `cancelled` reply)."""
        with self._lock:
            self.counters.cancelled += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return asdict(self.counters)


class Port:
    """How one client tells its backend how the engine stands. The backend is the one writer of
    its `state` and `error`: it hands each client it puts in use a port of its own, and shuts the
    port when it lets the client go (a reload, close), so a client it has replaced changes
    nothing by reporting late (a reply that arrives after the reload, say)."""

    def __init__(
        self,
        ledger: Ledger,
        read: Callable[[], tuple[State, str | None]],
        write: Callable[[State, str | None], None],
        log: Callable[[str], None],
        tell: Callable[[str], None],
    ) -> None:
        self.ledger = ledger  # the backend's: every call is counted there
        self._read, self._write, self._log, self._tell = read, write, log, tell
        self.open = True

    @property
    def state(self) -> State:
        return self._read()[0]

    @property
    def error(self) -> str | None:
        return self._read()[1]

    def ready(self, message: str | None = None) -> None:
        """The engine answers: completions (resume), the error cleared; `message` logged."""
        if self.open:
            self._write("ready", None)
            if message:
                self._log(message)

    def failed(self, error: str, tell: bool = False) -> None:
        """No completions, for `error`; `tell`: the user sees it (once, the caller's to say)."""
        if self.open:
            self._write("failed", error)
            if tell:
                self.tell(error)

    def troubled(self, error: str, tell: bool = False) -> None:
        """Ready, but calls fail for now (`error`, a pause the client keeps itself)."""
        if self.open:
            self._write(self.state, error)
            if tell:
                self.tell(error)

    def log(self, message: str) -> None:
        if self.open:
            self._log(message)

    def tell(self, message: str) -> None:
        """What the user must see; the log has it when no one can be told (any more)."""
        if not self.open:
            return
        try:
            self._tell(message)
        except Exception:
            self._log(message)

    def shut(self) -> None:
        self.open = False
