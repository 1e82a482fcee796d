"""A hostile completion API on loopback, for the tests of the engine clients' bounds
(tests/lsp/test_hostile_remote.py).

Each way of misbehaving is a mode, and a mode is the first part of the path:
`{base(mode)}/models` lists a model as an honest API would, and `{base(mode)}/fim/completions`
answers as the mode says (`ANSWERS`): 50 MB streamed three ways, a gzip bomb, a text that never
ends, an endless stream of `: ping`, a slow drip, JSON that is malformed or costly to parse, an
error message that holds terminal escapes and line breaks, and absurd `Retry-After` values.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import random
import string
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "hostile-coder"
KEY = "sk-hostile-0123456789abcdef"
MiB = 1 << 20
HUGE = 50 * MiB
# an error message that would forge a log line and repaint a terminal, were it written raw
FORGED = "\x1b[2J\x1b[31mboom\r\nERROR dllm: forged line\x1b[0m\u202e\x07"


def _head(h: BaseHTTPRequestHandler, status: int = 200, **headers: str) -> None:
    h.send_response(status)
    for name, value in headers.items():
        h.send_header(name.replace("_", "-"), value)
    h.end_headers()  # HTTP/1.0: with no Content-Length the body ends when the connection does


def _sse(h: BaseHTTPRequestHandler) -> None:
    _head(h, Content_Type="text/event-stream", Cache_Control="no-cache")


def _json(h: BaseHTTPRequestHandler, status: int, data: Any, **headers: str) -> None:
    raw = json.dumps(data).encode()
    _head(h, status, Content_Type="application/json", Content_Length=str(len(raw)), **headers)
    h.wfile.write(raw)


def _pour(h: BaseHTTPRequestHandler, chunk: bytes, total: int = HUGE) -> None:
    for _ in range(total // len(chunk)):
        h.wfile.write(chunk)


def huge_events(h: BaseHTTPRequestHandler) -> None:
    """50 MB of events with empty texts and 1 KiB of padding: the byte cap ends it, not the
    text's (4 MiB of events of 50 bytes would take the client ~0.5 s of parsing, and end
    at a short deadline as well as at the cap)."""
    _sse(h)
    pad = "p" * 1024
    event = f'data: {{"choices":[{{"text":"","finish_reason":null}}],"pad":"{pad}"}}\n\n'.encode()
    _pour(h, event * (MiB // len(event)))


def huge_line(h: BaseHTTPRequestHandler) -> None:
    """One `data:` line of 50 MB."""
    _sse(h)
    h.wfile.write(b'data: {"choices":[{"text":"')
    _pour(h, b"x" * MiB)


def huge_json(h: BaseHTTPRequestHandler) -> None:
    """A plain JSON answer of 50 MB, no Content-Length: its end is the connection's."""
    _head(h, Content_Type="application/json")
    h.wfile.write(b'{"choices":[{"text":"')
    _pour(h, b"x" * MiB)


@functools.cache
def _bomb() -> bytes:
    return gzip.compress(b'{"choices":[{"text":"' + b"x" * HUGE + b'"}]}', 9)


def gzip_bomb(h: BaseHTTPRequestHandler) -> None:
    """50 KB on the wire, 50 MB once decoded; the client asked for no encoding."""
    body = _bomb()
    _head(
        h, Content_Type="application/json", Content_Encoding="gzip", Content_Length=str(len(body))
    )
    h.wfile.write(body)


def long_text(h: BaseHTTPRequestHandler) -> None:
    """Events of 1 KiB of text each, 50 MB of them: the text cap ends it. The text is words at
    random on one line, as no stop rule ends it (a repetition would be cut as a loop)."""
    _sse(h)
    events = (
        f"data: {json.dumps({'choices': [{'text': ' '.join(_words(i * 128, 128))}]})}\n\n"
        for i in range(100)
    )
    _pour(h, "".join(events).encode())


@functools.cache
def _all_words() -> tuple[str, ...]:
    rng = random.Random(0)
    return tuple("".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(100 * 128))


def _words(start: int, n: int) -> tuple[str, ...]:
    return _all_words()[start : start + n]


def pings(h: BaseHTTPRequestHandler) -> None:
    """`: ping` every 50 ms, for ever: no wait for a byte is ever long."""
    _sse(h)
    while True:
        h.wfile.write(b": ping\n\n")
        h.wfile.flush()
        time.sleep(0.05)


def drip(h: BaseHTTPRequestHandler) -> None:
    """A valid answer, one byte every 50 ms."""
    raw = json.dumps({"choices": [{"text": "a + b", "finish_reason": "stop"}]}).encode() * 10
    _head(h, Content_Type="application/json", Content_Length=str(len(raw)))
    for i in range(len(raw)):
        h.wfile.write(raw[i : i + 1])
        h.wfile.flush()
        time.sleep(0.05)


def not_json(h: BaseHTTPRequestHandler) -> None:
    _sse(h)
    h.wfile.write(b'data: {"choices": [{"text": "a + b\n\ndata: [DONE]\n\n')


def deep_json(h: BaseHTTPRequestHandler) -> None:
    """Nesting 40,000 deep: the parser's recursion, not a ValueError."""
    _json_raw(h, b'{"choices":' + b"[" * 40_000)


def wide_json(h: BaseHTTPRequestHandler) -> None:
    """A million small values beside the answer: ~190 ms of parsing, were it parsed."""
    _json_raw(h, b'{"choices":[{"text":"a"}],"pad":[' + b",".join([b"1"] * 1_000_000) + b"]}")


def long_ints(h: BaseHTTPRequestHandler) -> None:
    """500 integers of 4,000 digits: CPython reads each in quadratic time."""
    ints = b",".join([b"9" * 4000] * 500)
    _json_raw(h, b'{"choices":[{"text":"a"}],"n":[' + ints + b"]}")


def _json_raw(h: BaseHTTPRequestHandler, raw: bytes) -> None:
    _head(h, Content_Type="application/json", Content_Length=str(len(raw)))
    h.wfile.write(raw)


def largest_allowed(h: BaseHTTPRequestHandler) -> None:
    """An answer just under the caps: 8,000 characters of words on one line."""
    text = " ".join(_words(0, 1000))
    _json(h, 200, {"choices": [{"text": text, "finish_reason": "length"}]})


def control_400(h: BaseHTTPRequestHandler) -> None:
    _json(h, 400, {"error": {"message": FORGED + "x" * 5000, "type": "invalid"}})


def control_503(h: BaseHTTPRequestHandler) -> None:
    _json(h, 503, {"error": {"message": FORGED, "type": "overloaded"}})


def retry_999999(h: BaseHTTPRequestHandler) -> None:
    _json(h, 429, {"error": {"message": "slow down"}}, Retry_After="999999")


def retry_1e400(h: BaseHTTPRequestHandler) -> None:
    _json(h, 429, {"error": {"message": "slow down"}}, Retry_After="1e400")


ANSWERS: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {
    f.__name__: f
    for f in (huge_events, huge_line, huge_json, gzip_bomb, long_text, pings, drip, not_json,
              deep_json, wide_json, long_ints, largest_allowed, control_400, control_503,
              retry_999999, retry_1e400)
}  # fmt: skip


class Hostile:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []  # (method, path)
        _bomb(), _all_words()  # built now, not while a test measures
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True

    def base(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{mode}/v1"

    def asked(self, mode: str) -> int:
        return sum(1 for m, p in self.seen if m == "POST" and p.startswith(f"/{mode}/"))


def _handler(hostile: Hostile) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            hostile.seen.append(("GET", self.path))
            if self.path.endswith("/v1/models"):
                _json(self, 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            else:
                _json(self, 404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            hostile.seen.append(("POST", self.path))
            answer = ANSWERS.get(self.path.split("/")[1])
            if answer is None or not self.path.endswith("/fim/completions"):
                _json(self, 404, {"error": {"message": "not found"}})
                return
            # the client stops reading (what it is meant to do): the writes fail
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                answer(self)

    return Handler


class Service:
    """The engine service's HTTP front (`/v1/models`, `/v2/infill`) as a hostile one: `mode`
    says how the next `/v2/infill` is answered (`SERVICE_ANSWERS`)."""

    def __init__(self) -> None:
        self.mode = "huge"
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _service_handler(self))
        self.server.daemon_threads = True

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def _service_huge(h: BaseHTTPRequestHandler) -> None:
    _head(h, Content_Type="application/json")
    h.wfile.write(b'{"items":[{"text":"')
    _pour(h, b"x" * MiB)


def _service_control(h: BaseHTTPRequestHandler) -> None:
    error = {"code": 500, "type": "internal\x1b[31m", "message": FORGED}
    _json(h, 500, {"error": error})


SERVICE_ANSWERS: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {
    "huge": _service_huge,
    "drip": drip,
    "control": _service_control,
    "bad_shape": lambda h: _json(h, 200, {"items": [{"text": "a", "tokens": "many"}]}),
    "not_json": lambda h: _json_raw(h, b'{"items": [{"text": "a"'),
}


def _service_handler(service: Service) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            _json(self, 200, {"data": [{"id": MODEL, "max_positions": 4096}]})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                SERVICE_ANSWERS[service.mode](self)

    return Handler
