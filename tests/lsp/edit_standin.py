"""A Mercury Edit-shaped next-edit API on loopback, for the tests of the hosted edit engine
(lsp_server/engines/hosted_edit.py, tests/lsp/test_hosted_edit.py).

The shapes are Inception's documented ones: `POST /v1/edit/completions` with
`Authorization: Bearer KEY` takes `{"model", "messages": [{"role": "user", "content"}], ...}`,
one user message whose content holds the tagged sections in order (`SECTIONS`, each opened and
closed, `<|code_to_edit|>` inside the current file with one `<|cursor|>` in it), and answers
`{"object": "edit.completion", "choices": [{"index", "message": {"role": "assistant",
"content"}, "finish_reason"}], "usage"}`, errors as `{"error": {"message", "type", "code"}}`.

What it checks of each request is in `problems` (empty when the request was as documented); a
request it cannot take gets 400. Its answer: `rewrite(region)`, the code_to_edit region without
the cursor tag rewritten (inside ``` fences when `fenced`), unless `plan` holds the next
`Answer`: a status (401, 429 with Retry-After, 503...), a stall, a raw body (garbage, a huge
one, the wrong shape).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "mercury-edit-2"
KEY = "sk-edit-test-0123456789abcdef"
ROUTE = "/v1/edit/completions"
SECTIONS = ("recently_viewed_code_snippets", "current_file_content", "edit_diff_history")
CURSOR = "<|cursor|>"
USAGE = ("prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens",
         "cached_input_tokens")  # fmt: skip
_REGION = re.compile(r"<\|code_to_edit\|>\n(.*?)<\|/code_to_edit\|>\n", re.S)


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "failed"  # the error's message, for a status other than 200
    raw: bytes | None = None  # the body as is (garbage, a huge one, the wrong shape)
    huge: int = 0  # bytes of padding streamed inside the content, no Content-Length
    hang_s: float = 0.0  # wait this long before answering
    held: threading.Event | None = None  # answer only once it is set


@dataclass
class Seen:
    path: str
    auth: str | None
    body: dict[str, Any]
    problems: list[str]

    @property
    def content(self) -> str:
        return str(self.body["messages"][0]["content"])

    @property
    def region(self) -> str:
        """The code_to_edit region as sent, cursor tag and all."""
        m = _REGION.search(self.content)
        return m.group(1) if m else ""


def check(body: Any) -> list[str]:
    """What of a request is not as documented."""
    if not isinstance(body, dict):
        return ["the body is not a JSON object"]
    problems = []
    if body.get("model") != MODEL:
        problems.append(f"model {body.get('model')!r}")
    if body.get("stream"):
        problems.append("stream is not supported on this route")
    messages = body.get("messages")
    if not (isinstance(messages, list) and len(messages) == 1 and isinstance(messages[0], dict)):
        return [*problems, "messages is not one message"]
    if messages[0].get("role") != "user" or not isinstance(messages[0].get("content"), str):
        return [*problems, "the message is not a user's text"]
    content: str = messages[0]["content"]
    at = 0
    for tag in SECTIONS:
        opened = content.find(f"<|{tag}|>\n", at)
        closed = content.find(f"<|/{tag}|>\n", max(opened, 0))
        if opened < 0 or closed < 0:
            problems.append(f"section {tag} missing or out of order")
            continue
        at = closed
    current = content[content.find("<|current_file_content|>") : content.find("<|/current_f")]
    if not current.startswith("<|current_file_content|>\ncurrent_file_path: "):
        problems.append("no current_file_path")
    if len(_REGION.findall(current)) != 1:
        problems.append("not one code_to_edit region inside the current file")
    elif _REGION.search(current).group(1).count(CURSOR) != 1:  # type: ignore[union-attr]
        problems.append("not one cursor in the region")
    max_tokens = body.get("max_tokens", 1024)
    if not isinstance(max_tokens, int) or not 1 <= max_tokens <= 8192:
        problems.append(f"max_tokens {max_tokens!r}")
    return problems


class Standin:
    def __init__(
        self, rewrite: Callable[[str], str] = lambda region: region, fenced: bool = True
    ) -> None:
        self.rewrite, self.fenced = rewrite, fenced
        self.plan: list[Answer] = []
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def address(self) -> str:
        return "mercury+" + self.base

    def next_answer(self) -> Answer:
        with self.lock:
            return self.plan.pop(0) if self.plan else Answer()

    def answer_to(self, seen: Seen) -> str:
        new = self.rewrite(seen.region.replace(CURSOR, ""))
        return f"```\n{new}```" if self.fenced else new


def _handler(standin: Standin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, raw: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(raw)

        def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
            error = {"error": {"message": message, "type": "x", "param": None, "code": "x"}}
            self._send(status, json.dumps(error).encode(), headers)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = None
            seen = Seen(self.path, self.headers.get("Authorization"), body or {}, check(body))
            standin.seen.append(seen)
            if self.headers.get("Authorization") != f"Bearer {KEY}":
                self._error(401, "Incorrect API key provided")
                return
            if self.path != ROUTE:
                self._error(404, f"no route {self.path}")
                return
            if seen.problems:
                self._error(400, "; ".join(seen.problems))
                return
            answer = standin.next_answer()
            time.sleep(answer.hang_s)
            if answer.held is not None:
                answer.held.wait(60)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._answer(answer, seen)  # the client may have read what it would and left

        def _answer(self, answer: Answer, seen: Seen) -> None:
            if answer.status != 200:
                self._error(answer.status, answer.message, answer.headers)
            elif answer.raw is not None:
                self._send(200, answer.raw, answer.headers)
            elif answer.huge:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()  # HTTP/1.0: the body ends when the connection does
                self.wfile.write(b'{"choices":[{"message":{"content":"')
                for _ in range(answer.huge // 65536):
                    self.wfile.write(b"x" * 65536)
                self.wfile.write(b'"}}]}')
            else:
                message = {"role": "assistant", "content": standin.answer_to(seen)}
                data = {
                    "id": "cmpl-standin",
                    "object": "edit.completion",
                    "created": int(time.time()),
                    "model": MODEL,
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": dict.fromkeys(USAGE, 1),
                }
                self._send(200, json.dumps(data).encode(), answer.headers)

    return Handler
