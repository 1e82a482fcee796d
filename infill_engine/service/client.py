"""A blocking client of the engine service: one connection, one thread (tests, bench-serve, the
evaluation)."""

from __future__ import annotations

import contextlib
import itertools
import socket
from collections.abc import Mapping
from typing import Any

from ..scheduler import Priority
from .frames import CHUNK, MAX_FRAME, FrameError, FrameReader, Message, encode_frame
from .listen import Address, parse_address
from .wire import RequestId, hello, reply_error


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
        self.send(hello(token))
        self.hello = self.recv()
        if (refused := reply_error(self.hello)) is not None:
            self.close()
            raise refused

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
        if (failed := reply_error(m)) is not None:
            raise failed
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
