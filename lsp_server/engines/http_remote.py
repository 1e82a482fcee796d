"""The engine service's HTTP front (`engineAddress: "http://HOST:PORT"`) as a transport of the
language server: the same surface as remote.py's msgpack `RemoteClient` (connect, send, cancel,
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
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import httpx

from infill_engine.service import TOKEN_ENV, Message

from .remote import Link, Refused, Unavailable

# the calls the HTTP front offers, by message type
ROUTES = {"v2/infill": "/v2/infill", "refine": "/v2/refine"}


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
            reply = await self._client().get("/v1/models", timeout=self.connect_timeout_s)
        except httpx.HTTPError as e:
            raise Unavailable(f"cannot connect: {e or type(e).__name__}") from None
        if reply.status_code == 401:
            hint = f" (set the engineToken setting or ${TOKEN_ENV} to the service's token)"
            raise Refused(f"the service refused the connection: unauthorized{hint}")
        if reply.status_code != 200:
            raise Unavailable(f"GET /v1/models answered HTTP {reply.status_code}")
        try:
            entry = reply.json()["data"][0]
            model, positions = entry["id"], entry.get("max_positions")
        except (ValueError, LookupError, TypeError, AttributeError):
            model, positions = None, None
        if self.closed:
            raise Unavailable("the client is closed")
        self.up = True
        hello: Message = {"type": "hello", "model": model}
        if isinstance(positions, int) and not isinstance(positions, bool) and positions > 0:
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
        headers = {"Content-Type": "application/json"}
        try:
            response = await self._client().post(route, content=content, headers=headers)
        except httpx.HTTPError as e:
            if not reply.done():
                reply.set_exception(Unavailable(f"connection lost: {e or type(e).__name__}"))
            self._lost(f"connection lost: {e or type(e).__name__}")
            return
        if reply.done():
            return  # cancelled meanwhile
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code == 200 and isinstance(data, dict):
            reply.set_result({"type": kind, "id": rid, "result": data})
            return
        err = data.get("error") if isinstance(data, dict) else None
        err = err if isinstance(err, dict) else {}
        code = str(err.get("type") or f"http_{response.status_code}")
        message = str(err.get("message") or f"HTTP {response.status_code}")
        reply.set_result(_error(rid, kind, code, message))

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


def _error(rid: int, kind: str | None, code: str, message: str) -> Message:
    return {"type": kind, "id": rid, "error": {"code": code, "message": message}}
