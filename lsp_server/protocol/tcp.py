"""The language server over TCP, behind a token gate, one session per connection.

The first frame of each connection is read and checked before any server sees it: it must be an
`initialize` request whose `initializationOptions.token` equals the server's token. Anything else
(a wrong, missing or unencodable token, junk, an oversized or truncated frame, silence for
FIRST_FRAME_SECONDS) gets one JSON-RPC error with a fixed message (no traceback, no path, no
server state) and that connection alone is closed; frames pipelined behind it are never read.

An accepted connection gets its own session: a fresh server from the factory (its own
documents, settings, model and reply stream) fed by transport.py's resynchronising reader. One
session runs at a time, because each loads its own model: a second client that authenticates
while one is served is refused, and the first client's replies stay on the first connection.
When a client leaves, however it leaves (exit, a closed socket mid-request, a reset), its
in-flight requests are cancelled, its model released, and the listener takes the next client.
The process never exits on a client's account; it stops on a signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import Callable
from typing import Any

from .session import DllmServer
from .transport import CHUNK, FrameReader, dispatch, error_frame, serve

log = logging.getLogger(__name__)

MAX_FIRST_FRAME = 1 << 20  # an initialize request is a few KiB
MAX_FIRST_HEADERS = 8192
FIRST_FRAME_SECONDS = 30.0
INVALID_REQUEST = -32600


class Refused(Exception):
    """The first frame does not authenticate the connection. The message goes to the client."""

    def __init__(self, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.request_id = request_id


async def read_first_body(reader: asyncio.StreamReader) -> bytes:
    """The first frame's body, read strictly: no resynchronising before authentication."""
    headers = 0
    length = None
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            raise Refused("the connection closed before a complete frame") from None
        except asyncio.LimitOverrunError:
            raise Refused("frame headers too long") from None
        headers += len(line)
        if headers > MAX_FIRST_HEADERS:
            raise Refused("frame headers too long")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            value = value.strip()
            length = int(value) if value.isdigit() and len(value) < 20 else None
    if length is None or not 0 < length <= MAX_FIRST_FRAME:
        raise Refused(f"the first frame needs a Content-Length in (0, {MAX_FIRST_FRAME}]")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise Refused("the connection closed before a complete frame") from None


def check_first_frame(body: bytes, token: str) -> Any:
    """The id of an `initialize` request that carries the token; raise Refused otherwise."""
    try:
        message = json.loads(body)
    except ValueError:  # not JSON, or not UTF-8
        raise Refused("the first frame is not JSON") from None
    if not isinstance(message, dict):
        raise Refused("the first frame is not a JSON-RPC message")
    request_id = message.get("id")
    if message.get("method") != "initialize" or request_id is None:
        raise Refused("the first request must be initialize, with the token", request_id)
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    sent = options.get("token") if isinstance(options, dict) else None
    if not isinstance(sent, str) or not hmac.compare_digest(
        sent.encode("utf-8", "surrogatepass"), token.encode("utf-8", "surrogatepass")
    ):
        raise Refused("this server needs initializationOptions.token", request_id)
    return request_id


class SocketWriter:
    """pygls' writer for one connection: replies for a client that has gone are dropped."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(data)

    def close(self) -> None:  # pygls' exit handler calls this, then sys.exit
        self._writer.close()


def end_session(server: DllmServer) -> None:
    """Cancel what the client left running and release its model."""
    for future in list(server.protocol._request_futures.values()):
        future.cancel()
    if server.load_task is not None:
        server.load_task.cancel()
    server.backend.close()


def serve_tcp(new_server: Callable[[], DllmServer], host: str, port: int, token: str) -> None:
    """Serve authenticated clients on host:port, one session at a time, until a signal."""
    active: DllmServer | None = None

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal active
        try:
            body = await asyncio.wait_for(read_first_body(reader), FIRST_FRAME_SECONDS)
            request_id = check_first_frame(body, token)
            if active is not None:
                raise Refused("another client is connected", request_id)
        except (Refused, asyncio.TimeoutError, OSError) as e:
            refuse(writer, e)
            return
        session = active = new_server()  # no await since the check: no second claimant
        out = SocketWriter(writer)
        session.protocol.set_writer(out)
        log.info("a TCP client authenticated")
        try:
            dispatch(body, session.protocol, out)
            await serve(FrameReader(lambda: reader.read(CHUNK)), session.protocol, out)
        except SystemExit:  # pygls' exit handler: the end of this session, not of the server
            log.info("a TCP client sent exit")
        except OSError as e:
            log.info("a TCP client went away: %s", e)
        finally:
            end_session(session)
            active = None
            writer.close()

    async def main() -> None:
        listener = await asyncio.start_server(connection, host, port)
        async with listener:
            await listener.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


def refuse(writer: asyncio.StreamWriter, e: Exception) -> None:
    message = str(e) if isinstance(e, Refused) else "no complete first frame in time"
    request_id = e.request_id if isinstance(e, Refused) else None
    log.warning("refused a TCP client: %s", message)
    if not writer.is_closing():
        writer.write(error_frame(request_id, INVALID_REQUEST, message))
    writer.close()
