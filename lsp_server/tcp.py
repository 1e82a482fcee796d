"""The language server over TCP, behind a token gate.

pygls' own TCP mode hands every frame of a connection to the server and checks nothing; a token
checked inside the `initialize` handler comes too late, since frames pipelined behind a refused
`initialize` are still served. Here the first frame of each connection is read and checked
before the server sees anything: it must be an `initialize` request whose
`initializationOptions.token` equals the server's token. Anything else gets one JSON-RPC error
(no traceback, no server state) and that connection alone is closed; the server keeps listening.
An accepted connection is then served by pygls as usual, and when it ends the server stops, as
a language server does when its client goes. While one client is served, others are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import threading
from typing import Any

from pygls.io_ import run_async

from .server import DllmServer

log = logging.getLogger(__name__)

MAX_FIRST_FRAME = 1 << 20  # an initialize request is a few KiB
FIRST_FRAME_SECONDS = 30.0
INVALID_REQUEST = -32600


class Refused(Exception):
    """The first frame does not authenticate the connection."""

    def __init__(self, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.request_id = request_id


async def read_frame(reader: asyncio.StreamReader, limit: int = MAX_FIRST_FRAME) -> bytes:
    """One LSP frame, headers and body, exactly as received. Raises Refused when malformed."""
    raw = b""
    length = None
    while True:
        line = await reader.readline()
        if not line:
            raise Refused("the connection closed before a complete frame")
        raw += line
        if len(raw) > 8192:
            raise Refused("frame headers too long")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise Refused("bad Content-Length") from None
    if length is None or not 0 < length <= limit:
        raise Refused(f"the first frame needs a Content-Length in (0, {limit}]")
    return raw + await reader.readexactly(length)


def check_first_frame(frame: bytes, token: str) -> None:
    """Accept an `initialize` request that carries the token; raise Refused otherwise."""
    body = frame.split(b"\r\n\r\n", 1)[-1] if b"\r\n\r\n" in frame else frame.split(b"\n\n", 1)[-1]
    try:
        message = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise Refused("the first frame is not JSON") from None
    if not isinstance(message, dict):
        raise Refused("the first frame is not a JSON-RPC message")
    request_id = message.get("id")
    if message.get("method") != "initialize" or request_id is None:
        raise Refused("the first request must be initialize, with the token", request_id)
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    sent = options.get("token") if isinstance(options, dict) else None
    if not isinstance(sent, str) or not hmac.compare_digest(sent.encode(), token.encode()):
        raise Refused("this server needs initializationOptions.token", request_id)


def _error_frame(request_id: Any, message: str) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": INVALID_REQUEST, "message": message},
        }
    ).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamReader) -> None:
    try:
        while data := await source.read(65536):
            sink.feed_data(data)
    finally:
        sink.feed_eof()


def serve_tcp(server: DllmServer, host: str, port: int, token: str) -> None:
    """Serve one authenticated client on host:port (blocking until it is done)."""
    stop = threading.Event()
    server._stop_event = stop
    busy = False

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal busy
        try:
            if busy:
                raise Refused("another client is connected")
            frame = await asyncio.wait_for(read_frame(reader), FIRST_FRAME_SECONDS)
            check_first_frame(frame, token)
        except (Refused, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            request_id = e.request_id if isinstance(e, Refused) else None
            message = str(e) if isinstance(e, Refused) else "no complete first frame in time"
            log.warning("refused a TCP client: %s", message)
            try:
                writer.write(_error_frame(request_id, message))
                await writer.drain()
            except OSError:
                pass
            writer.close()
            return
        busy = True
        feed = asyncio.StreamReader()
        feed.feed_data(frame)
        pump = asyncio.ensure_future(_pump(reader, feed))
        server.protocol.set_writer(writer)
        try:
            await run_async(
                stop_event=stop,
                reader=feed,
                protocol=server.protocol,
                logger=log,
                error_handler=server.report_server_error,
            )
        finally:
            pump.cancel()
            server.shutdown()

    async def main() -> None:
        listener = await asyncio.start_server(connection, host, port)
        server._server = listener
        async with listener:
            with contextlib.suppress(asyncio.CancelledError):  # shutdown closes the listener
                await listener.serve_forever()

    asyncio.run(main())
