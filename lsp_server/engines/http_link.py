"""The engine service's HTTP front (`engineAddress: "http://HOST:PORT"`) as a transport of the
language server: the same surface as link.py's msgpack `RemoteClient` (connect, send, cancel,
close, reconnection with backoff from `Link`), over `httpx.AsyncClient`.

- **Connect** = `GET /v1/models` with the token (`Authorization: Bearer <token>`): a 401 is a
  refusal that retrying cannot fix, no answer is "unavailable" (the backoff retries); the hello
  it stands for names the model.
- **Requests**: `v2/infill` is `POST /v2/infill` and `refine` is `POST /v2/refine`, with the
  same fields as JSON; the reply body is the `result` map, an error is
  `{"error": {"code": <HTTP status>, "type": <service code>, "message"}}`, handed on as the
  msgpack front's `{"error": {"code": <service code>, ...}}`.
- **Cancel** drops the request (its task is cancelled, the connection closed): the service
  takes the disconnect as a cancel and drops the rows; the caller gets `cancelled` at once.
- A request that cannot reach the service (connection refused or reset) is a lost connection:
  `on_down`, then reconnection with backoff. Proxies from the environment are not used (the
  service is usually on this machine, and a corporate `HTTP_PROXY` would swallow loopback).
- An answer is hostile input, as a hosted API's is (untrusted.py): read as it arrives, at most
  MAX_ANSWER_BYTES, within DEADLINE_S for the whole request (a slow drip ends there; no wait per
  read, as fills take long), its error's code and message `shown`. Past either bound the
  request fails (`too_large`, `deadline`) and the connection stands.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import Any

import httpx

from infill_engine.fields import is_int
from infill_engine.service import TOKEN_ENV, Message

from .link import Link, Refused, Unavailable
from .untrusted import BadAnswer, parse_json, read_body, shown

# the calls the HTTP front offers, by message type
ROUTES = {"v2/infill": "/v2/infill", "refine": "/v2/refine"}
DEADLINE_S = 300.0  # a whole request: far past a long refine on a CPU, a bound on a slow drip
_CODE = re.compile(r"[a-z][a-z0-9_]{0,39}")  # an error code as the service writes one


class HttpClient(Link):
    """One engine service behind its HTTP front."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.up = False
        self.http: httpx.AsyncClient | None = None
        self.pending: dict[int, tuple[asyncio.Task[None], asyncio.Future[Message]]] = {}

    @property
    def connected(self) -> bool:
        return self.up and not self.closed

    def _client(self) -> httpx.AsyncClient:
        if self.http is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            headers["Accept-Encoding"] = "identity"  # a compressed body's size is not its own
            self.http = httpx.AsyncClient(
                base_url=str(self.address),
                headers=headers,
                timeout=httpx.Timeout(None, connect=self.connect_timeout_s),  # fills take long
                trust_env=False,
            )
        return self.http

    async def connect(self) -> Message:
        if self.closed:
            raise Unavailable("the client is closed")
        self.attempts += 1
        try:
            exchange = self._exchange("GET", "/v1/models", None)
            status, data = await asyncio.wait_for(exchange, self.connect_timeout_s)
        except (httpx.HTTPError, asyncio.TimeoutError, BadAnswer) as e:
            raise Unavailable(f"cannot connect: {shown(str(e) or type(e).__name__)}") from None
        if status == 401:
            hint = f" (set the engineToken setting or ${TOKEN_ENV} to the service's token)"
            raise Refused(f"the service refused the connection: unauthorized{hint}")
        if status != 200:
            raise Unavailable(f"GET /v1/models answered HTTP {status}")
        try:
            entry = data["data"][0]
            model, positions = shown(entry["id"]), entry.get("max_positions")
        except (LookupError, TypeError, AttributeError):
            model, positions = None, None
        if self.closed:
            raise Unavailable("the client is closed")
        self.up = True
        hello: Message = {"type": "hello", "model": model}
        if is_int(positions) and positions > 0:
            hello["max_positions"] = positions  # as the msgpack front's hello says it
        return hello

    def send(self, kind: str, fields: Mapping[str, Any]) -> tuple[int, asyncio.Future[Message]]:
        """POST a request; (its id, a future of its reply as the msgpack front words it)."""
        if not self.connected:
            raise Unavailable("not connected")
        rid = next(self._ids)
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Message] = loop.create_future()
        route = ROUTES.get(kind)
        if route is None:
            message = f"the HTTP front has no {kind!r}"
            reply.set_result(_error(rid, kind, "unknown_method", message))
            return rid, reply
        task = loop.create_task(self._post(rid, kind, route, dict(fields), reply))
        self.pending[rid] = (task, reply)
        task.add_done_callback(lambda _: self.pending.pop(rid, None))
        return rid, reply

    async def _post(
        self, rid: int, kind: str, route: str, body: dict[str, Any], reply: asyncio.Future[Message]
    ) -> None:
        content = json.dumps(body).encode()  # ASCII: a lone surrogate travels escaped
        try:
            status, data = await asyncio.wait_for(
                self._exchange("POST", route, content), DEADLINE_S
            )
        except httpx.HTTPError as e:
            lost = f"connection lost: {shown(str(e) or type(e).__name__)}"
            if not reply.done():
                reply.set_exception(Unavailable(lost))
            self._lost(lost)
            return
        except asyncio.TimeoutError:
            status, data = 0, _failure("deadline", f"no answer within {DEADLINE_S:g} s")
        except BadAnswer as e:
            status, data = 0, _failure(e.code, f"the service's answer: {e}")
        if reply.done():
            return  # cancelled meanwhile
        if status == 200 and isinstance(data, dict):
            reply.set_result({"type": kind, "id": rid, "result": data})
            return
        err = data.get("error") if isinstance(data, dict) else None
        err = err if isinstance(err, dict) else {}
        code = str(err.get("type") or "")
        code = code if _CODE.fullmatch(code) else f"http_{status}"
        message = shown(err.get("message") or f"HTTP {status}")
        reply.set_result(_error(rid, kind, code, message))

    async def _exchange(self, method: str, route: str, content: bytes | None) -> tuple[int, Any]:
        """One request: its status, and its body as JSON (None when an error's is not JSON)."""
        headers = {"Content-Type": "application/json"} if content is not None else None
        client = self._client()
        async with client.stream(method, route, content=content, headers=headers) as response:
            raw = await read_body(response)
        try:
            return response.status_code, await parse_json(raw)
        except BadAnswer:
            if response.status_code == 200:
                raise
            return response.status_code, None  # a proxy's page, say: the status says it

    def _lost(self, reason: str) -> None:
        if not self.up or self.closed:
            return
        self.up = False
        for task, reply in list(self.pending.values()):
            task.cancel()
            if not reply.done():
                reply.set_exception(Unavailable(reason))
        self.on_down(reason)
        self.retry()

    def cancel(self, rid: int) -> None:
        """Drop the request: the service sees its client go and cancels the rows."""
        entry = self.pending.pop(rid, None)
        if entry is not None:
            task, reply = entry
            task.cancel()
            if not reply.done():
                reply.set_result(_error(rid, None, "cancelled", "cancelled by the client"))

    def close(self) -> None:
        """Stop retrying and drop every request; those in flight fail with Unavailable."""
        self._stop_retrying()
        self.up = False
        for task, reply in list(self.pending.values()):
            task.cancel()
            if not reply.done():
                reply.set_exception(Unavailable("closed"))
        self.pending.clear()
        http, self.http = self.http, None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop any more: the sockets close with the process
            return
        if http is not None:
            closing = loop.create_task(http.aclose())
            closing.add_done_callback(lambda t: t.cancelled() or t.exception())


def _failure(code: str, message: str) -> dict[str, Any]:
    """A failure on this side, worded as the service words its own."""
    return {"error": {"type": code, "message": message}}


def _error(rid: int, kind: str | None, code: str, message: str) -> Message:
    return {"type": kind, "id": rid, "error": {"code": code, "message": message}}
