"""Bytes to JSON-RPC messages, for stdio and TCP alike: the frame reader that never goes deaf.

pygls' own reader trusts the stream: one oversized Content-Length allocates it (MemoryError,
OverflowError), and one malformed header leaves it waiting for a frame that never starts. This
reader is a small state machine over a bounded buffer instead:

- A header block is lines up to a blank one (`\\r\\n` or a bare `\\n`). Header names are
  case-insensitive; Content-Length must be plain ASCII digits. A block without a valid length is
  skipped, and so is everything up to the next `Content-Length:` header, even one glued to junk.
- A body over MAX_FRAME is streamed through and dropped, never held, and the drop is logged.
- A body never contains a header: a `Content-Length: N` line cannot occur in valid JSON (a JSON
  string holds no raw line break), so when one starts inside a body the body was cut short (or
  its length overstated), and reading resumes at that header. A truncated body therefore costs
  one parse error, not the next request.

`serve` hands each body to the pygls protocol, which judges the message (protocol/jsonrpc.py's
Protocol answers a malformed one); a body that is not JSON never reaches it and gets -32700 here,
with a fixed message and id null. Memory is bounded by MAX_FRAME plus a
few chunks, whatever arrives.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCProtocol

from infill_engine.fields import is_id

log = logging.getLogger(__name__)

MAX_FRAME = 64 << 20  # bytes: far past any source file an editor sends, far below a RAM problem
MAX_LINE = 8 << 10  # a header line; a longer one is junk, dropped as it streams in
CHUNK = 1 << 16  # one read from the pipe or socket
# A header as it can start a frame. Its span is bounded, so a scan that keeps the last SPAN bytes
# of what it drops still finds a header split across two reads.
HEADER = re.compile(rb"content-length[ \t]{0,8}:[ \t]{0,8}[0-9]{1,20}[ \t]{0,8}\r?\n", re.I)
SPAN = 80
NAME = re.compile(rb"content-length[ \t]*:", re.I)
DIGITS = re.compile(rb"[0-9]{1,20}")
PARSE_ERROR = -32700

ReadChunk = Callable[[], Awaitable[bytes]]  # the next bytes; b"" at the end of the stream


class Writer(Protocol):
    def write(self, data: bytes) -> Any: ...

    def close(self) -> Any: ...


class FrameReader:
    """Frame bodies from a byte stream, resynchronising at the next header after any fault."""

    def __init__(self, read: ReadChunk) -> None:
        self._read = read
        self._buf = bytearray()
        self._eof = False
        self._lost = 0  # bytes skipped since the last good frame

    async def next(self) -> bytes | None:
        """The next body (possibly cut short, then not JSON); None at the end of the stream."""
        while (length := await self._headers()) is not None:
            if length > MAX_FRAME:
                log.error("a frame of %d bytes exceeds the %d MiB limit: discarding it",
                          length, MAX_FRAME >> 20)  # fmt: skip
                await self._skip(length)
                continue
            body = await self._body(length)
            if body is None:
                break
            if self._lost:
                log.warning("framing: resynchronised after skipping %d bytes", self._lost)
                self._lost = 0
            return body
        return None

    def _note(self, why: str, skipped: int) -> None:
        if not self._lost:  # one line per episode, however long the junk
            log.warning("framing: %s; skipping to the next Content-Length header", why)
        self._lost += max(skipped, 1)

    async def _fill(self) -> bool:
        if not self._eof and (chunk := await self._read()):
            self._buf += chunk
            return True
        self._eof = True
        return False

    async def _line(self) -> bytes | None:
        """The next line without its line end; None at the end of the stream."""
        searched = 0
        while (end := self._buf.find(b"\n", searched)) < 0:
            if len(self._buf) > MAX_LINE:  # keep the tail: a header may start there
                self._note("a header line over 8 KiB", len(self._buf) - SPAN)
                del self._buf[: len(self._buf) - SPAN]
            searched = len(self._buf)
            if not await self._fill():
                if self._buf:
                    self._note("the stream ended inside a header", len(self._buf))
                return None
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        return line[:-1] if line.endswith(b"\r") else line

    async def _headers(self) -> int | None:
        """Read header lines until a blank one ends a block with a valid Content-Length.

        Other lines are skipped: junk, other headers, a Content-Length that is not a length (which
        voids the block's length). None at the end of the stream.
        """
        length: int | None = None
        why = "a header block without Content-Length"
        while (line := await self._line()) is not None:
            starts = [m.start() for m in NAME.finditer(line)]
            if starts and starts[-1] > 0:  # junk glued to a header: the last one counts
                self._note("junk before a header", starts[-1])
                line = line[starts[-1] :]
            if not line:
                if length is not None:
                    return length
                self._note(why, 2)
                continue
            name, colon, value = line.partition(b":")
            if colon and name.strip().lower() == b"content-length":
                value = value.strip()
                length = int(value) if DIGITS.fullmatch(value) else None
                why = f"Content-Length {value[:24]!r} is not a length"
            elif not colon:
                self._note("a line that is not a header", len(line) + 1)
        return None

    async def _body(self, length: int) -> bytes | None:
        """length bytes, or fewer when a header starts inside them; None at the end."""
        searched = 0
        while True:
            hit = HEADER.search(self._buf, max(0, searched - SPAN), length + SPAN)
            if hit is not None and hit.start() < length:
                length = hit.start()  # cut short: the rest is the next frame
                break
            if len(self._buf) >= length:
                break
            searched = len(self._buf)
            if not await self._fill():
                self._note("the stream ended inside a body", len(self._buf))
                self._buf.clear()
                return None
        body = bytes(self._buf[:length])
        del self._buf[:length]
        return body

    async def _skip(self, length: int) -> None:
        """Drop length bytes as they stream in, stopping early at a header."""
        while True:
            hit = HEADER.search(self._buf, 0, min(length, len(self._buf)) + SPAN)
            if hit is not None and hit.start() < length:
                del self._buf[: hit.start()]
                return
            if len(self._buf) >= length:
                del self._buf[:length]
                return
            dropped = max(0, len(self._buf) - SPAN)
            del self._buf[:dropped]
            length -= dropped
            if not await self._fill():
                self._buf.clear()
                return


def error_frame(msg_id: Any, code: int, message: str) -> bytes:
    if not is_id(msg_id):
        msg_id = None
    error = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
    data = json.dumps(error).encode()
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


def _request_id(body: bytes) -> Any:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) and "method" in message else None


def dispatch(body: bytes, protocol: JsonRPCProtocol, writer: Writer) -> None:
    """Hand one body to the protocol, or answer why it cannot be handled."""
    try:
        message = json.loads(body, object_hook=protocol.structure_message)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the C stack
        log.warning("a frame body is not JSON (%d bytes)", len(body))
        writer.write(error_frame(None, PARSE_ERROR, "Parse error: the body is not JSON"))
        return
    except JsonRpcException as e:  # the params do not fit the method
        log.warning("a message does not fit its method: %s", e.message)
        if (msg_id := _request_id(body)) is not None:
            writer.write(error_frame(msg_id, e.code, e.message or type(e).__name__))
        return
    try:
        protocol.handle_message(message)
    except Exception:  # a bad message ends here, never the loop; its traceback stays on stderr
        log.exception("a message could not be handled")


async def serve(frames: FrameReader, protocol: JsonRPCProtocol, writer: Writer) -> None:
    """Dispatch every frame until the stream ends."""
    while (body := await frames.next()) is not None:
        dispatch(body, protocol, writer)


class StdinChunks:
    """stdin read on a daemon thread, one chunk handed over at a time.

    A blocked os.read cannot be cancelled: on a daemon thread it never holds up the exit, and the
    bounded queue keeps a fast writer from filling memory.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=4)
        self._thread: threading.Thread | None = None

    async def read(self) -> bytes:
        if self._thread is None:
            loop = asyncio.get_running_loop()
            self._thread = threading.Thread(
                target=self._pump, args=(loop,), name="stdin", daemon=True
            )
            self._thread.start()
        return await self._queue.get()

    def _pump(self, loop: asyncio.AbstractEventLoop) -> None:
        chunk = b"."
        while chunk:
            try:
                chunk = os.read(self._fd, CHUNK)
            except OSError:
                chunk = b""
            try:
                asyncio.run_coroutine_threadsafe(self._queue.put(chunk), loop).result()
            except RuntimeError:  # the loop is gone: the server is exiting
                return


def serve_stdio(server: LanguageServer) -> None:
    """Serve one client on stdin/stdout until the stream ends or the client sends exit."""
    writer = StdoutWriter(sys.stdout.buffer)
    server.protocol.set_writer(writer)
    frames = FrameReader(StdinChunks(sys.stdin.fileno()).read)
    try:
        asyncio.run(serve(frames, server.protocol, writer))
    except BrokenPipeError:
        log.error("the client closed stdout: stopping")
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
