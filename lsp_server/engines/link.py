"""The language server as a client of `dllm-infill serve` (docs/service.md): `engineAddress`.

`RemoteClient` keeps one connection to the service on the server's event loop: the hello
(version and token), requests matched to replies by id, `cancel {id}` notifications, and, when
the connection is lost, reconnection with exponential backoff until it is back or closed.

`Link` is what every transport shares (the settings, reconnection with backoff); `RemoteClient`
is the msgpack one, http_link.py's `HttpClient` the HTTP one (`http://HOST:PORT`). The wire
alone: what a request means to the language server is engine_service.py's.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from infill_engine.service import (
    CHUNK,
    MAX_FRAME,
    TOKEN_ENV,
    Address,
    FrameError,
    FrameReader,
    Message,
    ServeError,
    encode_frame,
    hello,
    parse_address,
    reply_error,
)

from ..options import normalize_address
from .backoff import Backoff, Retry
from .untrusted import shown

log = logging.getLogger("dllm-infill-ls.remote")

# Hello replies after which trying again cannot help: the settings must change.
PERMANENT = frozenset({"unauthorized", "unsupported_version"})


class Unavailable(ConnectionError):
    """The service cannot be reached now (not listening, connection lost, no hello in time)."""


class Refused(ConnectionError):
    """The service answered the hello with an error that retrying does not fix."""


class RemoteError(ValueError):
    """An error reply to a request (busy, deadline, bad_request, internal), or something the
    service does not offer; the message is for the user, `code` the reply's error code."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


def engine_address(text: str) -> Address:
    """An `engineAddress` (`unix:PATH`, `tcp://HOST:PORT`, `http://HOST:PORT`) as the
    service's `Address`."""
    try:
        return parse_address(normalize_address(text))
    except (ValueError, ServeError) as e:
        raise ValueError(f"engineAddress {e}") from None


def engine_token(explicit: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The token to send: the `engineToken` setting, else $DLLM_SERVE_TOKEN, else none."""
    if explicit:
        return explicit
    return (os.environ if env is None else env).get(TOKEN_ENV) or None


# -- the connection -------------------------------------------------------------------------------
@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    hello: Message
    frames: FrameReader
    pending: dict[int, asyncio.Future[Message]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


async def _open(address: Address, token: str | None, timeout: float) -> _Connection:
    """Connect and shake hands. Unavailable (try again later) or Refused (do not)."""
    try:
        if address.kind == "unix":
            opening = asyncio.open_unix_connection(address.path)
        else:
            opening = asyncio.open_connection(address.host, address.port)
        reader, writer = await asyncio.wait_for(opening, timeout)
    except (OSError, asyncio.TimeoutError) as e:
        raise Unavailable(f"cannot connect: {e or 'timed out'}") from None
    frames = FrameReader(MAX_FRAME)
    try:
        writer.write(encode_frame(hello(token)))
        reply = await asyncio.wait_for(_first_message(reader, frames), timeout)
    except (OSError, asyncio.TimeoutError, FrameError) as e:
        writer.close()
        raise Unavailable(f"no hello from the service: {e or 'timed out'}") from None
    if (refused := reply_error(reply)) is not None:
        writer.close()
        code, message = shown(refused.code, 40), shown(refused.message)
        hint = ""
        if code == "unauthorized":
            hint = f" (set the engineToken setting or ${TOKEN_ENV} to the service's token)"
        error = f"the service refused the connection: {code}: {message}{hint}"
        raise (Refused if code in PERMANENT else Unavailable)(error)
    return _Connection(reader, writer, reply, frames)


async def _first_message(reader: asyncio.StreamReader, frames: FrameReader) -> Message:
    while True:
        data = await reader.read(CHUNK)
        if not data:
            raise Unavailable("the service closed the connection")
        for item in frames.feed(data):
            if isinstance(item, FrameError):
                raise item
            return item


class Link:
    """What every transport to the service shares: the settings of a connection, and
    reconnection with backoff (`backoff_s`, doubling up to `max_backoff_s`) whenever it is
    lost. `on_up(hello)` runs on every (re)connection, `on_down(reason)` on every loss and on a
    refusal. `sleep(delay)` is the wait before each attempt (asyncio.sleep; a test replaces it
    to see the delays without waiting them). A transport adds `connected`, `connect`, `send`,
    `cancel` and `close`."""

    def __init__(
        self,
        address: Address,
        token: str | None,
        on_up: Callable[[Message], Awaitable[None]],
        on_down: Callable[[str], None],
        *,
        backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.address = address
        self.token = token
        self.on_up = on_up
        self.on_down = on_down
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.connect_timeout_s = connect_timeout_s
        self.closed = False
        self.attempts = 0  # connection attempts, all told
        self.sleep: Callable[[float], Awaitable[object]] = asyncio.sleep
        self.reconnects = 0  # connections made after a loss or a failed first attempt
        self._ids = itertools.count(1)
        self._retry = Retry(
            self._reconnect,
            lambda: Backoff(self.backoff_s, self.max_backoff_s),
            done=lambda: self.closed or self.connected,
            sleep=lambda delay: self.sleep(delay),  # the one set now (a test sets its own)
        )

    @property
    def connected(self) -> bool:
        raise NotImplementedError

    async def connect(self) -> Message:
        """One attempt; the hello reply. Unavailable or Refused."""
        raise NotImplementedError

    def send(self, kind: str, fields: Mapping[str, Any]) -> tuple[int, asyncio.Future[Message]]:
        """Send a request; (its id, a future of its reply). Unavailable when not connected."""
        raise NotImplementedError

    def cancel(self, rid: int) -> None:
        """Cancel a request in flight: its reply says `cancelled`."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop retrying and drop the connection; requests in flight fail with Unavailable."""
        raise NotImplementedError

    def retry(self) -> None:
        """Keep trying to connect, with backoff, until connected or closed."""
        if not self.closed:
            self._retry.start()

    @property
    def retrying(self) -> bool:
        """Whether it is trying to connect again now."""
        return self._retry.running

    async def _reconnect(self) -> bool:
        """One more try (over when refused: no retry fixes that)."""
        try:
            hello = await self.connect()
        except Refused as e:
            self.on_down(str(e))
            return True
        except Unavailable as e:
            log.debug("engine service %s: %s; trying again", self.address, e)
            return False
        self.reconnects += 1
        await self.on_up(hello)
        return False  # over once connected (Retry's done), unless it was lost again

    def _stop_retrying(self) -> None:
        self.closed = True
        self._retry.stop()


class RemoteClient(Link):
    """One msgpack connection to the service (`unix:`, `tcp:`), re-established with backoff."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn: _Connection | None = None

    @property
    def connected(self) -> bool:
        return self.conn is not None

    async def connect(self) -> Message:
        if self.closed:
            raise Unavailable("the client is closed")
        self.attempts += 1
        conn = await _open(self.address, self.token, self.connect_timeout_s)
        if self.closed:
            conn.writer.close()
            raise Unavailable("the client is closed")
        self.conn = conn
        conn.task = asyncio.get_running_loop().create_task(self._read(conn))
        return conn.hello

    async def _read(self, conn: _Connection) -> None:
        reason = "the service closed the connection"
        try:
            while True:
                data = await conn.reader.read(CHUNK)
                if not data:
                    break
                for item in conn.frames.feed(data):
                    if isinstance(item, FrameError):
                        raise item
                    rid = item.get("id")
                    fut = conn.pending.pop(rid, None) if isinstance(rid, int) else None
                    if fut is not None and not fut.done():
                        fut.set_result(item)
                    elif "error" in item:
                        log.warning("engine service: %s", shown(item["error"]))
        except (OSError, FrameError) as e:
            reason = f"connection lost: {e}"
        except asyncio.CancelledError:
            reason = "closed"
            raise
        finally:
            self._lost(conn, reason)

    def _lost(self, conn: _Connection, reason: str) -> None:
        if self.conn is conn:
            self.conn = None
        conn.writer.close()
        for fut in conn.pending.values():
            if not fut.done():
                fut.set_exception(Unavailable(reason))
        conn.pending.clear()
        if not self.closed:
            self.on_down(reason)
            self.retry()

    def send(self, kind: str, fields: Mapping[str, Any]) -> tuple[int, asyncio.Future[Message]]:
        """Send a request; (its id, a future of its reply). Unavailable when not connected."""
        conn = self.conn
        if conn is None or conn.writer.is_closing():
            raise Unavailable("not connected")
        rid = next(self._ids)
        try:
            frame = encode_frame({**fields, "type": kind, "id": rid})
        except FrameError as e:
            raise RemoteError(f"the request is too large for the engine service: {e}") from None
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        conn.pending[rid] = fut
        conn.writer.write(frame)
        return rid, fut

    def cancel(self, rid: int) -> None:
        """`cancel {id}`: a notification, answered by the request itself (`cancelled`)."""
        conn = self.conn
        if conn is not None and rid in conn.pending and not conn.writer.is_closing():
            conn.writer.write(encode_frame({"type": "cancel", "id": rid}))

    def close(self) -> None:
        """Stop retrying and drop the connection; requests in flight fail with Unavailable."""
        self._stop_retrying()
        conn, self.conn = self.conn, None
        if conn is not None:
            if conn.task is not None:
                conn.task.cancel()
            conn.writer.close()
            for fut in conn.pending.values():
                if not fut.done():
                    fut.set_exception(Unavailable("closed"))
            conn.pending.clear()
