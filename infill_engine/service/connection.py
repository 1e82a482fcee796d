"""One client of the engine service: a `Connection` reads its frames, checks the handshake and
each request, queues the work on the service's scheduler and answers, in its own bounded outbox.

The event loop only reads, validates and writes; prompts are encoded on the service's helper
thread and the model runs on the scheduler's worker thread. Whatever a client sends or fails to
read costs only its own connection: its requests are cancelled when it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from ..fields import is_id
from ..hole import Hole
from ..params import InfillParams, InfillResult
from ..request import InfillRequest
from ..scheduler import PRIORITIES, Priority, Scheduler, Ticket
from .frames import CHUNK, FrameError, FrameReader, Message, encode_frame
from .metrics import Metrics
from .native import native_result, parse_native, run_native
from .refine import RefineAsk, can_refine, parse_refine, run_refine
from .wire import (
    PROTOCOL_VERSION,
    BadRequest,
    RequestId,
    WirePlan,
    error,
    parse_deadline,
    parse_id,
    parse_params,
    parse_plan,
    result_dict,
)
from .work import Build, Pending, Refusal, run_rows

NATIVE = "v2/infill"  # the message of the native call: the service plans the span

log = logging.getLogger("infill_engine.service")


@dataclass
class ServiceCounters:
    connections: int = 0  # accepted in all
    refused: int = 0  # over MAX_CONNECTIONS
    unauthorized: int = 0
    bad_frames: int = 0
    slow_readers: int = 0  # dropped for letting their outbox fill
    disconnect_cancels: int = 0  # requests cancelled because their client went away
    header_timeouts: int = 0  # HTTP connections closed for headers that did not arrive in time
    stalled_evictions: int = 0  # HTTP bodies still arriving, refused to make room (slots.py)


class Host(Protocol):
    """What a connection uses of its service (front.Service)."""

    engine: Any
    scheduler: Scheduler
    model: str
    token: str | None
    max_frame: int
    max_inflight: int
    handshake_timeout_s: float
    outbox: int
    counters: ServiceCounters
    encoder: ThreadPoolExecutor
    metrics: Metrics

    @property
    def max_positions(self) -> int: ...

    def health(self) -> dict[str, Any]: ...
    def stats(self) -> dict[str, Any]: ...


class Connection:
    def __init__(
        self, service: Host, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.frames = FrameReader(service.max_frame)
        self.outbox: asyncio.Queue[bytes | None] = asyncio.Queue(service.outbox)
        self.inflight: dict[RequestId, Pending] = {}
        self.closed = False
        self._writer_task = asyncio.create_task(self._write_loop())
        self._tasks: set[asyncio.Future[None]] = set()

    # -- lifecycle --------------------------------------------------------------------------------
    async def run(self) -> None:
        messages = self._messages()
        try:
            if await self._handshake(messages):
                async for item in messages:
                    if self._dispatch(item) == "stop":
                        break
        except (OSError, asyncio.IncompleteReadError) as e:
            log.info("a client went away: %s", e)
        finally:
            await messages.aclose()
            await self.finish()

    async def finish(self) -> None:
        """Cancel what is in flight, flush the replies already queued, close."""
        self.cancel_all()
        self.closed = True
        with contextlib.suppress(asyncio.QueueFull):
            self.outbox.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(self._writer_task), 5.0)
        except (asyncio.TimeoutError, OSError, asyncio.CancelledError):
            self._writer_task.cancel()
        self.writer.close()
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            await asyncio.wait_for(self.writer.wait_closed(), 5.0)

    def abort(self) -> None:
        """Drop the connection now (slow reader, shutdown)."""
        self.cancel_all()
        self.closed = True
        self._writer_task.cancel()
        self.writer.transport.abort()

    def cancel_all(self) -> None:
        for pending in list(self.inflight.values()):
            pending.stop(self.service.scheduler)  # rows still being built: once queued
            self.service.counters.disconnect_cancels += 1
        self.inflight.clear()

    async def _messages(self) -> AsyncGenerator[Message | FrameError, None]:
        while True:
            data = await self.reader.read(CHUNK)
            if not data:
                return
            for item in self.frames.feed(data):
                yield item

    # -- writing ----------------------------------------------------------------------------------
    def send(self, message: Message) -> None:
        if self.closed:
            return
        try:
            frame = encode_frame(message, self.service.max_frame)
        except FrameError as e:
            frame = encode_frame(
                error(message.get("id"), message.get("type"), "internal", str(e)),
                self.service.max_frame,
            )
        try:
            self.outbox.put_nowait(frame)
        except asyncio.QueueFull:
            log.warning("dropping a client that does not read its replies")
            self.service.counters.slow_readers += 1
            self.abort()

    async def _write_loop(self) -> None:
        while (frame := await self.outbox.get()) is not None:
            self.writer.write(frame)
            await self.writer.drain()

    # -- reading ----------------------------------------------------------------------------------
    async def _handshake(self, messages: AsyncIterator[Message | FrameError]) -> bool:
        service = self.service
        try:
            first = await asyncio.wait_for(anext(messages), service.handshake_timeout_s)
        except StopAsyncIteration:
            return False
        except asyncio.TimeoutError:
            self.send(error(None, "hello", "timeout", "no hello in time"))
            return False
        if isinstance(first, FrameError):
            if first.code == "bad_frame":
                service.counters.bad_frames += 1
            self.send(error(first.rid, "hello", first.code, str(first)))
            return False
        rid = first.get("id") if isinstance(first.get("id"), int | str) else None
        if first.get("type") != "hello":
            self.send(error(rid, "hello", "bad_request", "the first message must be a hello"))
            return False
        version = first.get("version")
        if type(version) is not int or version != PROTOCOL_VERSION:
            self.send(
                error(
                    rid,
                    "hello",
                    "unsupported_version",
                    f"this server speaks version {PROTOCOL_VERSION}",
                )
            )
            return False
        if service.token is not None:
            token = first.get("token")
            given = token.encode() if isinstance(token, str) else b""
            if not hmac.compare_digest(given, service.token.encode()):
                service.counters.unauthorized += 1
                self.send(error(rid, "hello", "unauthorized", "a valid token is required"))
                return False
        self.send(
            {
                "type": "hello",
                "id": rid,
                "version": PROTOCOL_VERSION,
                "model": service.model,
                "max_frame": service.max_frame,
                "max_inflight": service.max_inflight,
                "max_batch": service.scheduler.max_batch,
                "max_positions": service.max_positions,
                "priorities": list(PRIORITIES),
            }
        )
        return True

    def _dispatch(self, item: Message | FrameError) -> str | None:
        if isinstance(item, FrameError):  # a bad frame, or a map with broken text (frames.py)
            if item.code == "bad_frame":
                self.service.counters.bad_frames += 1
            if item.kind != "cancel":  # a cancel is never answered, a broken one neither
                self.send(error(item.rid, item.kind, item.code, str(item)))
            return "stop" if item.fatal else None
        kind = item.get("type")
        kind_name = kind if isinstance(kind, str) else None
        if kind == "cancel":  # a notification: the cancelled request answers "cancelled"
            self._cancel(item.get("id"))
            return None
        try:
            rid = parse_id(item)
        except BadRequest as e:
            self.send(error(None, kind_name, e.code, str(e)))
            return None
        if kind == "infill":
            self._infill(rid, item)
        elif kind == NATIVE:
            self._native(rid, item)
        elif kind == "refine":
            self._refine(rid, item)
        elif kind == "health":
            self.send({"type": kind, "id": rid, "result": self.service.health()})
        elif kind == "stats":
            self.send({"type": kind, "id": rid, "result": self.service.stats()})
        elif kind == "hello":
            self.send(error(rid, kind, "bad_request", "the handshake is already done"))
        else:
            self.send(error(rid, kind_name, "unknown_method", f"no method {str(kind)[:64]!r}"))
        return None

    def _cancel(self, rid: Any) -> None:
        if not is_id(rid):
            return
        pending = self.inflight.get(rid)
        if pending is None:
            return  # finished already, or never was
        pending.stop(self.service.scheduler)

    def _admit(self, rid: RequestId, kind: str) -> bool:
        """Room for one more request in flight with this id; else the error is sent."""
        if rid in self.inflight:
            self.send(error(rid, kind, "bad_request", "this id is already in flight"))
            return False
        if len(self.inflight) >= self.service.max_inflight:
            limit = self.service.max_inflight
            self.send(error(rid, kind, "busy", f"{limit} requests already in flight"))
            return False
        return True

    def _refine(self, rid: RequestId, msg: Message) -> None:
        """A refine (refine.py) on the loop; its re-prediction joins the running batch."""
        if not can_refine(self.service.engine):
            self.send(error(rid, "refine", "unknown_method", "this engine cannot refine"))
            return
        if not self._admit(rid, "refine"):
            return
        try:
            ask = parse_refine(msg)
        except BadRequest as e:
            self.send(error(rid, "refine", e.code, str(e)))
            return
        self._start(rid, lambda p: self._run_refine(rid, p, ask))

    def _start(self, rid: RequestId, work: Callable[[Pending], Awaitable[None]]) -> None:
        """Register a request in flight and run its work on the loop."""
        pending = Pending(threading.Event())
        self.inflight[rid] = pending
        task = asyncio.ensure_future(work(pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_refine(self, rid: RequestId, pending: Pending, ask: RefineAsk) -> None:
        try:
            result = await run_refine(self.service, ask, pending.cancel)
        except Refusal as e:
            reply = error(rid, "refine", e.code, e.message)
        else:
            reply = {"type": "refine", "id": rid, "result": result}
        self._reply(rid, pending, reply)

    def _infill(self, rid: RequestId, msg: Message) -> None:
        if not self._admit(rid, "infill"):
            return
        try:
            prefix, suffix = msg.get("prefix", ""), msg.get("suffix", "")
            if not isinstance(prefix, str) or not isinstance(suffix, str):
                raise BadRequest("prefix and suffix must be strings")
            params = parse_params(msg.get("params"))
            plan = parse_plan(msg.get("plan"))
            priority = msg.get("priority", "automatic")
            if priority not in tuple(PRIORITIES):  # compared, not hashed: [] is no key
                raise BadRequest(f"priority must be one of {list(PRIORITIES)}")
            deadline_ms = parse_deadline(msg.get("deadline_ms"))
        except BadRequest as e:
            self.send(error(rid, "infill", e.code, str(e)))
            return
        self._start(
            rid, lambda p: self._submit(rid, p, prefix, suffix, params, plan, priority, deadline_ms)
        )

    async def _submit(
        self,
        rid: RequestId,
        pending: Pending,
        prefix: str,
        suffix: str,
        params: InfillParams,
        plan: WirePlan | None,
        priority: Priority,
        deadline_ms: float | None,
    ) -> None:
        engine = self.service.engine

        def build(cancel: threading.Event) -> list[InfillRequest]:
            return [engine.request(prefix, suffix, params, plan=plan, cancel=cancel)]

        try:
            [(result, ticket)] = await self._rows(pending, build, priority, deadline_ms)
        except Refusal as e:
            self._reply(rid, pending, error(rid, "infill", e.code, e.message))
        else:
            reply = {"type": "infill", "id": rid, "result": result_dict(result, ticket)}
            self._reply(rid, pending, reply, [result])

    def _native(self, rid: RequestId, msg: Message) -> None:
        """`v2/infill`: the service plans the span and cuts the context (native.py)."""
        if not self._admit(rid, NATIVE):
            return
        try:
            ask = parse_native(msg)
        except BadRequest as e:
            self.send(error(rid, NATIVE, e.code, str(e)))
            return
        self._start(rid, lambda p: self._run_native(rid, p, ask))

    async def _run_native(self, rid: RequestId, pending: Pending, ask: Hole) -> None:
        service = self.service
        try:
            prepared, done = await run_native(
                service.engine, service.scheduler, service.encoder, pending, ask
            )
        except Refusal as e:
            self._reply(rid, pending, error(rid, NATIVE, e.code, e.message))
        else:
            result = native_result(ask, prepared, done, service.model)
            reply = {"type": NATIVE, "id": rid, "result": result}
            self._reply(rid, pending, reply, [r for r, _ in done])

    async def _rows(
        self, pending: Pending, build: Build, priority: Priority, deadline_ms: float | None
    ) -> list[tuple[InfillResult, Ticket]]:
        service = self.service
        return await run_rows(
            service.scheduler, service.encoder, pending, build, priority, deadline_ms
        )

    def _reply(
        self, rid: RequestId, pending: Pending, reply: Message, results: Sequence[Any] = ()
    ) -> None:
        err = reply.get("error")
        code = str(err.get("code")) if isinstance(err, dict) else "ok"
        seconds = time.monotonic() - pending.received
        self.service.metrics.observe("msgpack", str(reply.get("type")), code, seconds, results)
        if self.inflight.get(rid) is pending:
            del self.inflight[rid]
            self.send(reply)
