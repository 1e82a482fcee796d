"""The msgpack front of the engine service: `Service` holds what its connections share (the
engine and its scheduler, the token, the limits, the counters, the encoding thread) and serves
each stream it is handed with a `Connection` (connection.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..scheduler import Scheduler
from .connection import Connection, ServiceCounters
from .frames import MAX_FRAME
from .metrics import Metrics
from .wire import PROTOCOL_VERSION, error

if TYPE_CHECKING:
    from ..engine import Engine

HANDSHAKE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
MAX_INFLIGHT = 16  # infill requests one connection may have queued or running
OUTBOX = 64  # replies waiting for a connection's writer; a client that lets it fill is dropped
MAX_BODY = 4 << 20  # bytes of one HTTP request body
BODY_TIMEOUT_S = 10.0  # an HTTP body that takes longer to arrive is a slow client: 408
HEADER_TIMEOUT_S = 10.0  # and HTTP headers likewise (headers.py): 408 and the connection closed
HTTP_SLOTS = 256  # requests the HTTP front holds at once (slots.py); past it: 503
HTTP_SLOTS_PER_PEER = 128  # of which one client address may hold
WEDGED_S = 30.0  # one join-and-step running longer than this: the engine is wedged


class Service:
    """The protocol over any stream: `handle` serves one connection."""

    def __init__(
        self,
        engine: Engine,
        model: str,
        token: str | None = None,
        *,
        scheduler: Scheduler | None = None,
        max_frame: int = MAX_FRAME,
        max_inflight: int = MAX_INFLIGHT,
        max_connections: int = MAX_CONNECTIONS,
        handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
        outbox: int = OUTBOX,
        max_body: int = MAX_BODY,
        body_timeout_s: float = BODY_TIMEOUT_S,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        http_slots: int = HTTP_SLOTS,
        http_slots_per_peer: int = HTTP_SLOTS_PER_PEER,
        wedged_s: float = WEDGED_S,
    ) -> None:
        self.engine = engine
        # the engine's own queue and running batch, unless one of the service's is given (tests)
        self.scheduler = scheduler if scheduler is not None else engine.scheduler()
        self.model = model
        self.token = token
        self.max_frame = max_frame
        self.max_inflight = max_inflight
        self.max_connections = max_connections
        self.handshake_timeout_s = handshake_timeout_s
        self.outbox = outbox
        self.max_body = max_body  # the HTTP front's (http.py)
        self.body_timeout_s = body_timeout_s
        self.header_timeout_s = header_timeout_s
        self.http_slots = http_slots
        self.http_slots_per_peer = http_slots_per_peer
        self.wedged_s = wedged_s
        self.started = time.monotonic()
        self.connections: set[Connection] = set()
        self.counters = ServiceCounters()
        self.metrics = Metrics(self.stats)  # both fronts record here; scrapes read stats()
        # prompts are tokenised here, off the event loop, in arrival order
        self.encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dllm-encode")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer)
        self.counters.connections += 1
        if len(self.connections) >= self.max_connections:
            self.counters.refused += 1
            conn.send(error(None, "hello", "busy", "too many connections"))
            await conn.finish()
            return
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)

    def stats(self) -> dict[str, Any]:
        out = self.scheduler.stats()
        out["connections"] = len(self.connections)
        out["inflight"] = sum(len(c.inflight) for c in self.connections)
        out["service"] = dataclasses.asdict(self.counters)
        return out

    def wedged(self) -> str | None:
        """Why the engine cannot serve (its worker stopped, or one step has run past
        `wedged_s`), or None. Health checks read it: `/health` answers 503, and a Ray Serve
        replica is replaced (infill_engine/deploy)."""
        if not self.scheduler.alive:
            return "the scheduler has stopped"
        busy = self.scheduler.busy_s()
        if busy > self.wedged_s:
            return f"one step has run for {busy:.1f} s (the bound is {self.wedged_s:g} s)"
        return None

    def health(self) -> dict[str, Any]:
        s = self.scheduler.stats()
        why = self.wedged()
        return {
            "status": "ok" if why is None else "wedged",
            **({"reason": why} if why is not None else {}),
            "model": self.model,
            "version": PROTOCOL_VERSION,
            "uptime_s": round(time.monotonic() - self.started, 3),
            "queued": s["queued"],
            "running": s["running"],
            "max_positions": self.max_positions,
        }

    @property
    def max_positions(self) -> int:
        """The model's positions: context and span together (clients clamp their settings)."""
        args = getattr(self.engine, "args", None)
        return int(getattr(args, "max_positions", 0))

    def close_connections(self) -> None:
        for conn in list(self.connections):
            conn.abort()

    def shutdown(self) -> None:
        """Drop every connection, cancel all work and stop the threads."""
        self.close_connections()
        self.scheduler.close()
        self.encoder.shutdown(wait=False, cancel_futures=True)
