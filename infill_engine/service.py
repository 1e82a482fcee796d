"""`dllm-infill serve`: one engine for many editors, over a Unix socket or TCP.

Frames are a 4-byte big-endian length and a msgpack map (docs/service.md has the protocol). The
event loop only reads, validates and writes; prompts are encoded on a helper thread and the model
runs on the scheduler's worker thread (scheduler.py), which batches requests of all clients.

Isolation: each connection has its own frame reader, its own bounded outbox and writer task, and
a cap on requests in flight, so a client that sends garbage, stops reading or disappears costs
the others nothing; its requests are cancelled when it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import ipaddress
import itertools
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgpack

from .params import InfillParams, InfillResult
from .scheduler import PRIORITIES, Busy, Priority, Scheduler, SchedulerError, Ticket
from .stop import StopRule

log = logging.getLogger("infill_engine.service")

PROTOCOL_VERSION = 1
MAX_FRAME = 1 << 20  # bytes of one msgpack payload, either way
HEADER = 4
CHUNK = 1 << 16
HANDSHAKE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
MAX_INFLIGHT = 16  # infill requests one connection may have queued or running
OUTBOX = 64  # replies waiting for a connection's writer; a client that lets it fill is dropped
MAX_ID_CHARS = 256
TOKEN_ENV = "DLLM_SERVE_TOKEN"

Message = dict[str, Any]
RequestId = int | str


class FrameError(Exception):
    """A frame that is not a msgpack map. `fatal`: the stream cannot be followed past it (a
    length over the limit), so the connection ends after the error reply."""

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


class ServeError(Exception):
    """The service cannot start as configured (address, token, socket path)."""


class ServiceError(Exception):
    """An error reply, on the client side."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# -- frames ---------------------------------------------------------------------------------------
def encode_frame(message: Mapping[str, Any], max_frame: int = MAX_FRAME) -> bytes:
    body: bytes = msgpack.packb(dict(message), use_bin_type=True)
    if len(body) > max_frame:
        raise FrameError(f"message of {len(body)} bytes exceeds the {max_frame}-byte frame limit")
    return len(body).to_bytes(HEADER, "big") + body


def decode_payload(body: bytes) -> Message:
    """One frame's payload -> a map with string keys, or FrameError."""
    try:
        obj = msgpack.unpackb(body, raw=False, use_list=True, strict_map_key=True)
    except Exception as e:  # msgpack raises several kinds for malformed input
        raise FrameError(f"malformed msgpack: {type(e).__name__}: {e}"[:200]) from None
    if not isinstance(obj, dict):
        raise FrameError(f"a message must be a msgpack map, got {type(obj).__name__}")
    if not all(isinstance(k, str) for k in obj):
        raise FrameError("a message's keys must be strings")
    return obj


def _scan(buf: bytes | bytearray, max_frame: int) -> tuple[list[Message | FrameError], int, bool]:
    """The frames complete at the front of buf: (items, bytes consumed, broken).

    A frame with a bad payload becomes a FrameError item and the stream goes on after it. A
    length over max_frame is a fatal FrameError item; nothing after it is read (broken)."""
    items: list[Message | FrameError] = []
    pos, end = 0, len(buf)
    while end - pos >= HEADER:
        n = int.from_bytes(buf[pos : pos + HEADER], "big")
        if n > max_frame:
            items.append(
                FrameError(f"frame of {n} bytes exceeds the {max_frame}-byte limit", fatal=True)
            )
            return items, pos, True
        if end - pos - HEADER < n:
            break
        body = bytes(buf[pos + HEADER : pos + HEADER + n])
        pos += HEADER + n
        try:
            items.append(decode_payload(body))
        except FrameError as e:
            items.append(e)
    return items, pos, False


def decode_frames(
    buffer: bytes, max_frame: int = MAX_FRAME
) -> tuple[list[Message | FrameError], bytes]:
    """Decode the complete frames at the front of `buffer`: (messages, the rest).

    A malformed frame is a `FrameError` in the list, in its place; an oversized length is a
    fatal one, last, with the rest starting at its header. Never raises on any bytes."""
    items, used, _ = _scan(buffer, max_frame)
    return items, bytes(buffer[used:])


class FrameReader:
    """Incremental `decode_frames`: feed what the socket gives, get whole messages back. It holds
    at most one partial frame (<= max_frame + 4 bytes) besides the chunk just fed."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self.broken = False

    def feed(self, data: bytes) -> list[Message | FrameError]:
        if self.broken:
            return [FrameError("the stream ended at an oversized frame", fatal=True)]
        self._buf += data
        items, used, self.broken = _scan(self._buf, self.max_frame)
        if self.broken:
            self._buf.clear()
        else:
            del self._buf[:used]
        return items

    @property
    def pending(self) -> int:
        return len(self._buf)


# -- addresses and secrets ------------------------------------------------------------------------
@dataclass(frozen=True)
class Address:
    kind: Literal["unix", "tcp"]
    path: str = ""
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp:{host}:{self.port}"


def parse_address(text: str) -> Address:
    """`unix:PATH` or `tcp:HOST:PORT` (an IPv6 host in brackets)."""
    kind, sep, rest = text.partition(":")
    if kind == "unix" and sep and rest:
        return Address("unix", path=rest)
    if kind == "tcp" and sep:
        host, colon, port = rest.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if colon and host and port.isdigit() and int(port) < 65536:
            return Address("tcp", host=host, port=int(port))
    raise ServeError(f"--listen must be unix:PATH or tcp:HOST:PORT, got {text!r}")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token in an owner-only file; refuses a file others may read or write."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise ServeError(f"cannot open the token file: {e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ServeError(f"token file {path} is not a regular file")
        if st.st_mode & 0o077:
            raise ServeError(
                f"token file {path} is open to group/others (mode {stat.S_IMODE(st.st_mode):04o});"
                f" run: chmod 600 {path}"
            )
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise ServeError(f"token file {path} is not owned by this user")
        raw = f.read(4097)
    if len(raw) > 4096:
        raise ServeError(f"token file {path} is over 4096 bytes")
    token = raw.decode("utf-8", errors="strict").strip()
    if not token:
        raise ServeError(f"token file {path} is empty")
    return token


def resolve_token(token_file: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """--token-file wins over $DLLM_SERVE_TOKEN; None when neither is set."""
    if token_file:
        return read_token_file(token_file)
    value = (os.environ if env is None else env).get(TOKEN_ENV, "").strip()
    return value or None


def bind_unix(path: str) -> socket.socket:
    """A Unix socket bound at `path` with mode 0600, not yet listening. A stale socket file (no
    server answers on it) is removed; a live one, or a file that is not a socket, is refused."""
    if os.path.lexists(path):
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode):
            raise ServeError(f"{path} exists and is not a socket; not removing it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(1.0)
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # stale: its server is gone
        except OSError as e:
            raise ServeError(f"{path}: cannot check the existing socket: {e}") from None
        else:
            raise ServeError(f"another server is listening on {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the file is created 0600: no window where others may connect
    try:
        sock.bind(path)
    except OSError as e:
        sock.close()
        raise ServeError(f"cannot bind {path}: {e}") from None
    finally:
        os.umask(old)
    os.chmod(path, 0o600)  # and again, in case the platform ignores the umask for sockets
    return sock


# -- requests -------------------------------------------------------------------------------------
PARAM_FIELDS = frozenset(f.name for f in dataclasses.fields(InfillParams))
STOP_FIELDS = frozenset(f.name for f in dataclasses.fields(StopRule))


class BadRequest(Exception):
    code = "bad_request"


def parse_id(msg: Message) -> RequestId:
    rid = msg.get("id")
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        raise BadRequest("id must be an int or a string")
    if isinstance(rid, str) and len(rid) > MAX_ID_CHARS:
        raise BadRequest(f"id is over {MAX_ID_CHARS} characters")
    return rid


def parse_params(raw: Any) -> InfillParams:
    if raw is None:
        return InfillParams()
    if not isinstance(raw, dict):
        raise BadRequest("params must be a map")
    unknown = sorted(str(k) for k in raw if k not in PARAM_FIELDS)
    if unknown:
        raise BadRequest(f"unknown params: {', '.join(unknown)[:200]}")
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest("params.seed must be an int")
    if seed is not None and not 0 <= seed < 1 << 63:
        raise BadRequest("params.seed must be in [0, 2**63)")
    try:
        return InfillParams(**raw)
    except (ValueError, TypeError) as e:
        raise BadRequest(f"params: {e}"[:300]) from None


@dataclass(frozen=True)
class WirePlan:
    """A span plan sent by the client (planner.SpanPlan's span, max_span and stop rule)."""

    span: int
    max_span: int
    stop: StopRule


def parse_plan(raw: Any) -> WirePlan | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise BadRequest("plan must be a map")
    span, max_span, stop = raw.get("span"), raw.get("max_span", raw.get("span")), raw.get("stop")
    for name, v in (("span", span), ("max_span", max_span)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 16:
            raise BadRequest(f"plan.{name} must be an int in [1, 65536]")
    assert isinstance(span, int) and isinstance(max_span, int)
    if max_span < span:
        raise BadRequest("plan.max_span must be >= plan.span")
    stop = {} if stop is None else stop
    if not isinstance(stop, dict):
        raise BadRequest("plan.stop must be a map")
    unknown = sorted(str(k) for k in stop if k not in STOP_FIELDS)
    if unknown:
        raise BadRequest(f"unknown plan.stop fields: {', '.join(unknown)[:200]}")
    try:
        rule = StopRule(**stop)
    except ValueError as e:
        raise BadRequest(f"plan.{e}"[:300]) from None
    return WirePlan(span, max_span, rule)


def result_dict(r: InfillResult, ticket: Ticket) -> dict[str, Any]:
    return {
        "text": r.text,
        "tokens": r.tokens,
        "nfe_full": r.nfe_full,
        "nfe_block": r.nfe_block,
        "elapsed_ms": round(r.elapsed_ms, 3),
        "stop_reason": r.stop_reason,
        "span": r.span,
        "grown": r.grown,
        "edits": r.edits,
        "queue_ms": round(ticket.queue_ms, 3),
        "batch_size": ticket.batch_size,
    }


def error(rid: RequestId | None, kind: str | None, code: str, message: str) -> Message:
    return {"type": kind, "id": rid, "error": {"code": code, "message": message}}


@dataclass
class Pending:
    cancel: threading.Event
    received: float
    ticket: Ticket | None = None


@dataclass
class ServiceCounters:
    connections: int = 0  # accepted in all
    refused: int = 0  # over MAX_CONNECTIONS
    unauthorized: int = 0
    bad_frames: int = 0
    slow_readers: int = 0  # dropped for letting their outbox fill
    disconnect_cancels: int = 0  # requests cancelled because their client went away


class Service:
    """The protocol over any stream: `handle` serves one connection."""

    def __init__(
        self,
        scheduler: Scheduler,
        model: str,
        token: str | None = None,
        *,
        max_frame: int = MAX_FRAME,
        max_inflight: int = MAX_INFLIGHT,
        max_connections: int = MAX_CONNECTIONS,
        handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
        outbox: int = OUTBOX,
    ) -> None:
        self.scheduler = scheduler
        self.model = model
        self.token = token
        self.max_frame = max_frame
        self.max_inflight = max_inflight
        self.max_connections = max_connections
        self.handshake_timeout_s = handshake_timeout_s
        self.outbox = outbox
        self.started = time.monotonic()
        self.connections: set[Connection] = set()
        self.counters = ServiceCounters()
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

    def health(self) -> dict[str, Any]:
        s = self.scheduler.stats()
        return {
            "status": "ok",
            "model": self.model,
            "version": PROTOCOL_VERSION,
            "uptime_s": round(time.monotonic() - self.started, 3),
            "queued": s["queued"],
            "running": s["running"],
        }

    def close_connections(self) -> None:
        for conn in list(self.connections):
            conn.abort()

    def shutdown(self) -> None:
        """Drop every connection, cancel all work and stop the threads."""
        self.close_connections()
        self.scheduler.close()
        self.encoder.shutdown(wait=False, cancel_futures=True)


class Connection:
    def __init__(
        self, service: Service, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
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
            pending.cancel.set()  # a request still being encoded is cancelled once queued
            if pending.ticket is not None:
                self.service.scheduler.cancel(pending.ticket)
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
            service.counters.bad_frames += 1
            self.send(error(None, "hello", "bad_frame", str(first)))
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
                "priorities": list(PRIORITIES),
            }
        )
        return True

    def _dispatch(self, item: Message | FrameError) -> str | None:
        if isinstance(item, FrameError):
            self.service.counters.bad_frames += 1
            self.send(error(None, None, "bad_frame", str(item)))
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
        if isinstance(rid, bool) or not isinstance(rid, int | str):
            return
        pending = self.inflight.get(rid)
        if pending is None:
            return  # finished already, or never was
        pending.cancel.set()
        if pending.ticket is not None:
            self.service.scheduler.cancel(pending.ticket)

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
        """`Engine.refine` on a thread of its own: one scoring pass (a step's worth of the
        engine), then the remasked tokens are a row of the running batch, at command priority,
        beside the completions."""
        if not hasattr(self.service.scheduler.engine, "refine"):
            self.send(error(rid, "refine", "unknown_method", "this engine cannot refine"))
            return
        if not self._admit(rid, "refine"):
            return
        try:
            texts = [msg.get(k, "") for k in ("prefix", "text", "suffix")]
            if not all(isinstance(t, str) for t in texts):
                raise BadRequest("prefix, text and suffix must be strings")
            if not texts[1]:
                raise BadRequest("text must not be empty")
            fraction = msg.get("fraction", 0.25)
            if isinstance(fraction, bool) or not isinstance(fraction, int | float):
                raise BadRequest("fraction must be a number in (0, 1]")
            if not 0 < fraction <= 1:
                raise BadRequest("fraction must be a number in (0, 1]")
            params = parse_params(msg.get("params"))
        except BadRequest as e:
            self.send(error(rid, "refine", e.code, str(e)))
            return
        self._start(rid, lambda p: self._run_refine(rid, p, texts, float(fraction), params))

    def _start(self, rid: RequestId, work: Callable[[Pending], Awaitable[None]]) -> None:
        """Register a request in flight and run its work on the loop."""
        pending = Pending(threading.Event(), time.monotonic())
        self.inflight[rid] = pending
        task = asyncio.ensure_future(work(pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_refine(
        self,
        rid: RequestId,
        pending: Pending,
        texts: list[str],
        fraction: float,
        params: InfillParams,
    ) -> None:
        scheduler = self.service.scheduler
        engine: Any = scheduler.engine
        prefix, text, suffix = texts
        try:
            # its re-prediction joins this service's running batch, beside the completions
            r = await asyncio.to_thread(
                engine.refine, prefix, text, suffix, fraction, params, pending.cancel, scheduler
            )
        except ValueError as e:
            reply = error(rid, "refine", "bad_request", str(e)[:300])
        except SchedulerError as e:
            reply = error(rid, "refine", e.code, str(e))
        except Exception as e:
            log.error("refine %r failed", rid, exc_info=e)
            reply = error(rid, "refine", "internal", f"{type(e).__name__}: {e}"[:300])
        else:
            if r.stop_reason == "cancelled":
                reply = error(rid, "refine", "cancelled", f"cancelled after {r.nfe} passes")
            else:
                result = {
                    "text": r.text,
                    "remasked": r.remasked,
                    "changed": r.changed,
                    "nfe": r.nfe,
                    "stop_reason": r.stop_reason,
                }
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
            deadline_ms = msg.get("deadline_ms")
            if deadline_ms is not None and (
                isinstance(deadline_ms, bool)
                or not isinstance(deadline_ms, int | float)
                or not 0 < deadline_ms < 1e9
            ):
                raise BadRequest("deadline_ms must be a positive number of milliseconds")
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
        scheduler = self.service.scheduler

        def submit() -> Ticket:
            deadline_s = None
            if deadline_ms is not None:
                deadline_s = deadline_ms / 1000 - (time.monotonic() - pending.received)
            return scheduler.submit(
                prefix,
                suffix,
                params,
                plan=plan,
                priority=priority,
                deadline_s=deadline_s,
                cancel=pending.cancel,
            )

        try:
            ticket = await self.loop.run_in_executor(self.service.encoder, submit)
        except Busy as e:
            self._reply(rid, pending, error(rid, "infill", e.code, str(e)))
            return
        except ValueError as e:
            self._reply(rid, pending, error(rid, "infill", "bad_request", str(e)[:300]))
            return
        except Exception as e:  # the encoder pool shut down, a tokenizer failure
            log.error("infill %r could not be queued", rid, exc_info=e)
            self._reply(rid, pending, error(rid, "infill", "internal", str(e)[:300]))
            return
        pending.ticket = ticket
        if pending.cancel.is_set():  # cancelled (or disconnected) while it was being encoded
            scheduler.cancel(ticket)
        ticket.future.add_done_callback(lambda _: self._done_threadsafe(rid, pending, ticket))

    def _done_threadsafe(self, rid: RequestId, pending: Pending, ticket: Ticket) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
            self.loop.call_soon_threadsafe(self._done, rid, pending, ticket)

    def _done(self, rid: RequestId, pending: Pending, ticket: Ticket) -> None:
        future: Future[InfillResult] = ticket.future
        exc = future.exception() if not future.cancelled() else SchedulerError("cancelled")
        if isinstance(exc, SchedulerError):
            reply = error(rid, "infill", exc.code, str(exc))
        elif exc is not None:
            reply = error(rid, "infill", "internal", f"{type(exc).__name__}: {exc}"[:300])
        else:
            result = future.result()
            if result.stop_reason == "cancelled":
                reply = error(rid, "infill", "cancelled", f"cancelled after {result.nfe} passes")
            else:
                reply = {"type": "infill", "id": rid, "result": result_dict(result, ticket)}
        self._reply(rid, pending, reply)

    def _reply(self, rid: RequestId, pending: Pending, reply: Message) -> None:
        if self.inflight.get(rid) is pending:
            del self.inflight[rid]
            self.send(reply)


# -- running it -----------------------------------------------------------------------------------
def check_listen(address: Address, token: str | None, allow_remote: bool) -> None:
    """TCP needs a token, and a loopback host unless remote clients are allowed (ServeError)."""
    if address.kind != "tcp":
        return
    if token is None:
        raise ServeError(f"TCP needs a token: set ${TOKEN_ENV} or pass --token-file (mode 0600)")
    if not allow_remote and not is_loopback(address.host):
        raise ServeError(f"{address.host} is not a loopback address; pass --allow-remote")


async def serve(
    service: Service,
    address: Address,
    *,
    allow_remote: bool = False,
    ready: Callable[[Address], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Listen on `address` until `stop` is set (or forever). The service is shut down when this
    returns, also when it cannot listen (ServeError)."""
    inode: int | None = None
    try:
        check_listen(address, service.token, allow_remote)
        if address.kind == "tcp":
            try:
                server = await asyncio.start_server(service.handle, address.host, address.port)
            except OSError as e:
                raise ServeError(f"cannot listen on {address}: {e}") from None
            port = int(server.sockets[0].getsockname()[1])
            bound = Address("tcp", host=address.host, port=port)
        else:
            sock = bind_unix(address.path)
            inode = os.stat(address.path).st_ino
            try:
                server = await asyncio.start_unix_server(service.handle, sock=sock)
            except OSError as e:
                sock.close()
                raise ServeError(f"cannot listen on {address}: {e}") from None
            bound = address
        async with server:
            try:
                log.debug("listening on %s (model %s)", bound, service.model)
                if ready is not None:
                    ready(bound)
                await (stop.wait() if stop is not None else asyncio.Event().wait())
            finally:  # before the server waits for its connections to end
                server.close()
                service.shutdown()
    finally:
        service.shutdown()
        if inode is not None:
            with contextlib.suppress(OSError):
                if os.stat(address.path).st_ino == inode:
                    os.unlink(address.path)


class ServiceThread:
    """A service on its own event-loop thread: tests and bench-serve. `start()` returns the
    bound address (a real port for tcp:HOST:0); `stop()` shuts it down."""

    def __init__(self, service: Service, address: Address, allow_remote: bool = False) -> None:
        self.service = service
        self.address = address
        self.allow_remote = allow_remote
        self.bound: Address | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="dllm-service", daemon=True)

    def start(self, timeout: float = 30.0) -> Address:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise ServeError("the service did not start in time")
        if self._error is not None:
            raise self._error
        assert self.bound is not None
        return self.bound

    def stop(self, timeout: float = 30.0) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)

    def __enter__(self) -> ServiceThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(bound: Address) -> None:
                self.bound = bound
                self._ready.set()

            await serve(
                self.service,
                self.address,
                allow_remote=self.allow_remote,
                ready=ready,
                stop=self._stop,
            )

        try:
            asyncio.run(main())
        except BaseException as e:
            self._error = e
        finally:
            self._ready.set()


# -- a blocking client (tests, bench-serve; the language server's engineAddress to come) ----------
class ServiceClient:
    """One connection, one thread. `call` waits for the reply with its id and keeps the others
    for later `reply(id)` calls."""

    def __init__(
        self,
        address: str | Address,
        token: str | None = None,
        timeout: float | None = 60.0,
        max_frame: int = MAX_FRAME,
    ) -> None:
        addr = parse_address(address) if isinstance(address, str) else address
        if addr.kind == "unix":
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(addr.path)
        else:
            self.sock = socket.create_connection((addr.host, addr.port), timeout=timeout)
        self.frames = FrameReader(max_frame)
        self.max_frame = max_frame
        self._ids = itertools.count(1)
        self._waiting: list[Message] = []
        hello: Message = {"type": "hello", "version": PROTOCOL_VERSION}
        if token is not None:
            hello["token"] = token
        self.send(hello)
        self.hello = self.recv()
        if "error" in self.hello:
            self.close()
            err = self.hello["error"]
            raise ServiceError(str(err.get("code")), str(err.get("message")))

    def send(self, message: Mapping[str, Any]) -> None:
        self.sock.sendall(encode_frame(message, self.max_frame))

    def _read_more(self) -> None:
        data = self.sock.recv(CHUNK)
        if not data:
            raise ConnectionError("the server closed the connection")
        for item in self.frames.feed(data):
            if isinstance(item, FrameError):
                raise item
            self._waiting.append(item)

    def recv(self) -> Message:
        """The next message; ConnectionError when the server closed the connection."""
        while not self._waiting:
            self._read_more()
        return self._waiting.pop(0)

    def reply(self, rid: RequestId) -> Message:
        """The reply with this id; the others stay for later."""
        while True:
            for i, m in enumerate(self._waiting):
                if m.get("id") == rid:
                    return self._waiting.pop(i)
            self._read_more()

    def request(self, kind: str, rid: RequestId | None = None, **fields: Any) -> RequestId:
        """Send a request (an id is made up when none is given); returns its id."""
        rid = next(self._ids) if rid is None else rid
        self.send({"type": kind, "id": rid, **fields})
        return rid

    def call(self, kind: str, **fields: Any) -> Message:
        return self.reply(self.request(kind, **fields))

    def infill(
        self,
        prefix: str,
        suffix: str,
        params: Mapping[str, Any] | None = None,
        priority: Priority = "automatic",
        deadline_ms: float | None = None,
        plan: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The result map; raises ServiceError on an error reply."""
        fields: dict[str, Any] = {"prefix": prefix, "suffix": suffix, "priority": priority}
        fields["params"] = dict(params or {})
        if deadline_ms is not None:
            fields["deadline_ms"] = deadline_ms
        if plan is not None:
            fields["plan"] = dict(plan)
        m = self.call("infill", **fields)
        if "error" in m:
            raise ServiceError(str(m["error"].get("code")), str(m["error"].get("message")))
        result: dict[str, Any] = m["result"]
        return result

    def cancel(self, rid: RequestId) -> None:
        self.send({"type": "cancel", "id": rid})

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def socket_mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)
