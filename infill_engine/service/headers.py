"""The header deadline of the HTTP front's connections: a request's headers must all arrive within
`timeout_s` of its first byte (of the connection's opening, for its first request), or the
connection is answered 408 and closed.

uvicorn runs a timer only between requests (keep-alive); from a request's first byte until its
headers are complete nothing runs, so a client that sends half its headers and stalls held its
connection, its socket and its parser for as long as it liked (200 of them stayed open past 30 s).
Bodies have their own deadline in the app (http.py), since their reading is the app's.

`header_deadline(base, ...)` makes a subclass of uvicorn's HTTP protocol class (httptools' or
h11's: both set `cycle`, the request being answered, when a request's headers are complete), which
`uvicorn.Config(http=...)` takes in place of its own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any


def timeout_response(timeout_s: float) -> bytes:
    """A 408 with the front's JSON error body, and the connection closed."""
    message = f"the request headers did not arrive in {timeout_s:g}s"
    body = json.dumps({"error": {"code": 408, "type": "timeout", "message": message}}).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def header_deadline(
    base: type[Any], timeout_s: float, expired: Callable[[], None] = lambda: None
) -> type[asyncio.Protocol]:
    """`base` (a uvicorn HTTP protocol class) with the header deadline; `expired` is called for
    each connection closed by it (the service counts them)."""

    class HeaderDeadline(base):
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._seen = self.cycle  # the request whose headers were complete last
            self._partial = False  # bytes of the next request's headers have arrived
            self._timer: asyncio.TimerHandle | None = None
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.cycle is not self._seen:  # a request's headers are complete
                self._seen = self.cycle
                self._partial = False
                self._disarm()
            if self.cycle is None or self.cycle.response_complete:  # the next one's start
                self._partial = True
                if self._timer is None:
                    self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._timer = self.loop.call_later(timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expire(self) -> None:
            self._timer = None
            if self.transport.is_closing():
                return
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a request is being answered: its own deadlines apply
            expired()
            if self._partial:  # a connection that sent nothing is closed without a word
                self.transport.write(timeout_response(timeout_s))
            self.transport.close()

    return HeaderDeadline
