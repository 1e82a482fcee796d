"""A Mercury-shaped completion API on loopback, for the tests of the `openai+` engine client.

The shapes are Inception's OpenAI-compatible API's: `GET /v1/models` lists `{"data": [{"id"}]}`;
`POST /v1/fim/completions` takes `model`, `prompt`, `suffix`, `max_tokens`, `stream` and answers
`{"choices": [{"text", "finish_reason"}]}`, or with `stream: true` server-sent events of the same
chunks (`data: {...}` each, `data: [DONE]` last). `routes` picks which completion routes exist
(OpenAI's `/v1/completions` for a vLLM- or llama.cpp-like server). Every request is recorded;
`plan` holds the answers to give next (an HTTP status, headers, a pause before answering),
after which each answer is the `text` streamed in small chunks.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, TypeVar

MODEL = "mercury-coder"
KEY = "sk-test-0123456789"


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    message: str = ""  # the error's message, for a status other than 200
    hang_s: float = 0.0  # wait this long before answering
    # answer only once this is set (after hang_s): a test sets it when it is done, so that an
    # answer that came back to the client before that is impossible, whatever the machine's load
    held: threading.Event | None = None


@dataclass
class Seen:
    method: str
    path: str
    auth: str | None
    body: dict[str, Any]


class Standin:
    def __init__(
        self, text: str = "a + b\n", routes: tuple[str, ...] = ("/v1/fim/completions",)
    ) -> None:
        self.text = text
        self.routes = routes
        self.plan: list[Answer] = []
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def completions(self) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST"]

    def next_answer(self) -> Answer:
        with self.lock:
            return self.plan.pop(0) if self.plan else Answer()


def _handler(standin: Standin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(raw)

        def _authorized(self) -> bool:
            if self.headers.get("Authorization") == f"Bearer {KEY}":
                return True
            self._json(401, {"error": {"message": "Invalid API key", "type": "auth"}})
            return False

        def do_GET(self) -> None:
            standin.seen.append(Seen("GET", self.path, self.headers.get("Authorization"), {}))
            if not self._authorized():
                return
            if self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.loads(raw or b"{}")
            standin.seen.append(Seen("POST", self.path, self.headers.get("Authorization"), body))
            if not self._authorized():
                return
            if self.path not in standin.routes:
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            answer = standin.next_answer()
            time.sleep(answer.hang_s)
            if answer.held is not None:
                answer.held.wait(60)
            if answer.status != 200:
                error = {"error": {"message": answer.message or "failed", "type": "x"}}
                self._json(answer.status, error, answer.headers)
                return
            if body.get("stream"):
                self._stream(standin.text)
            else:
                choice = {"index": 0, "text": standin.text, "finish_reason": "stop"}
                self._json(200, {"object": "text_completion", "choices": [choice]})

        def _stream(self, text: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
            pieces = [text[i : i + 3] for i in range(0, len(text), 3)] or [""]
            try:
                for n, piece in enumerate(pieces):
                    last = n == len(pieces) - 1
                    choice = {"index": 0, "text": piece, "finish_reason": "stop" if last else None}
                    chunk = {"object": "text_completion", "choices": [choice]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client read what it needed and left

    return Handler


class Serving(Protocol):
    server: ThreadingHTTPServer


S = TypeVar("S", bound=Serving)


@contextmanager
def running(standin: S) -> Iterator[S]:
    """A stand-in's server on a thread while the block runs (every loopback stand-in's)."""
    thread = threading.Thread(target=standin.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield standin
    finally:
        standin.server.shutdown()
        standin.server.server_close()
        thread.join(timeout=5)
