"""The HTTP front of the engine service: an ASGI app (Starlette) over the same `Service` as the
msgpack front, so both share one scheduler, its batching and limits, the token and the error
codes (work.py). `dllm-infill serve --listen http://HOST:PORT` runs it with uvicorn; any ASGI
server (or Ray Serve's ingress) can mount `HttpFront(service).app` the same way.

| route                 | speaks                                         | auth  |
|-----------------------|------------------------------------------------|-------|
| `GET /health`         | status, model, queue; 503 when wedged          | none  |
| `GET /metrics`        | Prometheus text (metrics.py)                   | token |
| `GET /v1/models`      | the one model, OpenAI's shape                  | token |
| `POST /infill`        | llama.cpp's infill (compat.py)                 | token |
| `POST /v1/completions`| OpenAI's completions with `suffix` (compat.py) | token |
| `POST /v2/infill`     | the native call (native.py), JSON or msgpack   | token |
| `POST /v2/refine`     | refine a selection (refine.py), JSON or msgpack| token |

Every POST body is read with a size cap and a time limit, and its text checked once (text.py:
a string that is not Unicode is a 400 naming its field); headers have their deadline in the
server's protocol (headers.py), and a request holds one of the front's slots (slots.py) from
its headers to its answer. A client that goes away before its answer has its rows cancelled in
the engine (the batch drops them at the next step). Streaming (`stream: true`) sends server-sent
events (stream.py): each fill's text in pieces as its blocks finish, the rest when it is done,
then the final events; the pieces join to the plain call's text. Every answer is counted in
/metrics by route and code, 401s and 503s included; no such route (404) and a wrong method
(405) are JSON errors like the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import msgpack
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ..hole import Hole, Prepared
from ..params import InfillResult
from .compat import (
    CompatAsk,
    clip,
    finish_reason,
    llama_events,
    llama_piece,
    llama_reply,
    narrow,
    openai_events,
    openai_ident,
    openai_piece,
    openai_reply,
    parse_llama,
)
from .compat import parse_openai as parse_openai_body
from .frames import FrameError, decode_payload
from .front import Service
from .metrics import CONTENT_TYPE as METRICS_TYPE
from .native import native_result, parse_native, run_native, shown, without_secrets
from .refine import parse_refine, run_refine
from .slots import Slot, Slots
from .stream import Done, Shape, Stream, event
from .text import unicode_fault
from .wire import BadRequest
from .work import HTTP_STATUS, Pending, Refusal, Watch

MSGPACK = "application/msgpack"
ERROR_TYPES = {status: code for code, status in HTTP_STATUS.items() if code != "unknown_method"}

T = TypeVar("T")


def error_response(refusal: Refusal) -> JSONResponse:
    headers = {"Retry-After": "1"} if refusal.status == 503 else None
    return JSONResponse(refusal.body(), status_code=refusal.status, headers=headers)


class HttpFront:
    """`app` is the ASGI application; `service` the shared msgpack front's state."""

    def __init__(self, service: Service, *, max_inflight: int | None = None) -> None:
        self.service = service
        self.max_body = service.max_body
        self.body_timeout_s = service.body_timeout_s
        total = service.http_slots if max_inflight is None else max_inflight
        self.slots = Slots(total, min(total, service.http_slots_per_peer))
        self.app = Starlette(
            routes=[
                Route("/health", self.health, methods=["GET"]),
                Route("/metrics", self.metrics, methods=["GET"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/infill", self.infill, methods=["POST"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v2/infill", self.native, methods=["POST"]),
                Route("/v2/refine", self.refine, methods=["POST"]),
            ],
            exception_handlers={HTTPException: _http_error},
        )

    @property
    def inflight(self) -> int:
        return self.slots.held

    # -- plain routes -----------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        health = self.service.health()
        return JSONResponse(health, status_code=200 if health["status"] == "ok" else 503)

    async def metrics(self, request: Request) -> Response:
        if (refused := self._auth(request, "metrics")) is not None:
            return refused
        return PlainTextResponse(self.service.metrics.render(), media_type=METRICS_TYPE)

    async def models(self, request: Request) -> Response:
        if (refused := self._auth(request, "models")) is not None:
            return refused
        model = {
            "id": self.service.model,
            "object": "model",
            "owned_by": "dllm-infill",
            "max_positions": self.service.max_positions,
        }
        return JSONResponse({"object": "list", "data": [model]})

    # -- the calls --------------------------------------------------------------------------------
    async def infill(self, request: Request) -> Response:
        """llama.cpp's `/infill`: one reply, or a list of them for `n_cmpl` over 1."""
        model, n_ctx = self.service.model, self.service.max_positions

        def build(c: CompatAsk, prepared: Prepared | None, done: Done) -> list[dict[str, Any]]:
            if not done:  # nothing was written (a warm-up)
                return [llama_reply(c, None, "", None, model, n_ctx, i)
                        for i in range(c.ask.candidates)]  # fmt: skip
            replies = []
            for i, (r, text) in enumerate(self._answers(c, prepared, done)):
                text, hit = clip(text, c.stop, c.n_indent)
                replies.append(llama_reply(c, r, text, hit, model, n_ctx, i))
            return replies

        def plain(c: CompatAsk, replies: list[dict[str, Any]]) -> Any:
            bodies = [narrow(c, r) for r in replies]
            return bodies if c.ask.candidates > 1 else bodies[0]

        shape = Shape(build, plain, llama_events, False, llama_piece, lambda c: c.n_indent)
        return await self._compat(request, "infill", parse_llama, shape)

    async def completions(self, request: Request) -> Response:
        """OpenAI's `/v1/completions`, `suffix` making it a fill in the middle."""
        model, ident = self.service.model, openai_ident()  # one id for a stream's chunks

        def build(c: CompatAsk, prepared: Prepared | None, done: Done) -> dict[str, Any]:
            choices = [("", "length")] * c.ask.candidates if c.warm_only else []
            for r, text in self._answers(c, prepared, done) if done else ():
                text, hit = clip(text, c.stop, 0)
                choices.append((text, finish_reason(r, hit)))
            ctx = prepared.context if prepared is not None else None
            seen = len(ctx.prefix_ids) + len(ctx.suffix_ids) if ctx is not None else 0
            tokens = sum(r.tokens for r, _ in done)
            return openai_reply(c, choices, seen, tokens, model, ident)

        def piece(c: CompatAsk, index: int, text: str) -> dict[str, Any]:
            return openai_piece(c, ident, model, index, text)

        shape = Shape(build, lambda c, body: body, openai_events, True, piece, lambda c: 0)
        return await self._compat(request, "completions", parse_openai_body, shape)

    async def native(self, request: Request) -> Response:
        """The native call: JSON in and out, or msgpack (`Content-Type: application/msgpack`,
        answered in msgpack)."""
        packed = _is_msgpack(request)

        async def run() -> Response:
            ask = parse_native(await self._body(request, packed))
            prepared, done = await self._rows(request, ask)
            return _answer(native_result(ask, prepared, done, self.service.model), packed)

        return await self._guarded(request, "v2/infill", run)

    async def refine(self, request: Request) -> Response:
        """Refine a selection (the msgpack front's `refine`): JSON or msgpack as `native`."""
        packed = _is_msgpack(request)

        async def run() -> Response:
            ask = parse_refine(await self._body(request, packed))
            pending = Pending(threading.Event())
            work = run_refine(self.service, ask, pending.cancel)
            return _answer(await self._until_done(request, work, pending), packed)

        return await self._guarded(request, "v2/refine", run)

    # -- the shared path --------------------------------------------------------------------------
    def _answers(
        self, c: CompatAsk, prepared: Prepared | None, done: Done
    ) -> list[tuple[InfillResult, str]]:
        """Each candidate's text as a compatible route answers it, beside the row it reports:
        what an editor would show (decide.py), each of its texts once, as many as there were
        candidates at most ("" when it shows nothing); or, with `raw`, the model's own (a
        credential emptied). A route that must answer `n` repeats them in turn (openai_reply)."""
        if c.raw or prepared is None:
            return [(r, r.text) for r, _ in without_secrets(done)]
        chosen = shown(c.ask, prepared, done, self.service.model)
        texts = [x.text for x in chosen][: len(done)] or [""]
        return [(done[min(i, len(done) - 1)][0], t) for i, t in enumerate(texts)]

    async def _compat(
        self,
        request: Request,
        route: str,
        parse: Callable[[dict[str, Any]], CompatAsk],
        shape: Shape[Any],
    ) -> Response:
        async def run() -> Response:
            c = parse(await self._body(request, False))
            if c.stream:
                return StreamingResponse(
                    self._events(request, route, c, shape), media_type="text/event-stream"
                )
            if c.warm_only:  # nothing to write: a client warming its cache (llama.vim's ring)
                return JSONResponse(shape.plain(c, shape.build(c, None, [])))
            prepared, done = await self._rows(request, c.ask)
            return JSONResponse(shape.plain(c, shape.build(c, prepared, done)))

        return await self._guarded(request, route, run)

    async def _events(
        self, request: Request, route: str, c: CompatAsk, shape: Shape[Any]
    ) -> AsyncIterator[str]:
        """Server-sent events of a streamed call; a client that goes away before the fill is
        done cancels its rows, as in a plain call."""
        slot = self.slots.hold(_peer(request))  # admitted already: its own place till the end
        started = time.monotonic()
        code = "ok"
        # a finished answer is known only when the fills are: no pieces while they decode
        stream = Stream(
            c, shape, lambda watch: self._rows(request, c.ask, watch if c.raw else None)
        )
        try:
            async with contextlib.aclosing(stream.events()) as events:
                async for chunk in events:
                    yield chunk
        except Refusal as e:
            code = e.code
            yield event(e.body())
        except asyncio.CancelledError:  # the rows were cancelled with it (_rows)
            code = "cancelled"
            raise
        finally:
            slot.release()
            results = [r for r, _ in stream.done]
            self.service.metrics.observe("http", route, code, time.monotonic() - started, results)

    async def _guarded(
        self, request: Request, route: str, run: Callable[[], Awaitable[Response]]
    ) -> Response:
        """Auth, a slot (slots.py), refusals as error responses, and the metrics: every answer
        but a stream's (which records itself when done) is counted here, 401s and 503s too."""
        started = time.monotonic()
        if (refused := self._auth(request, route)) is not None:
            return refused
        code = "ok"
        try:
            request.state.slot = slot = self.slots.take(_peer(request))
        except Refusal as e:
            self._observe(route, e.code, started)
            return error_response(e)
        try:
            response = await run()
        except BadRequest as e:  # a field the parsers refused
            code = e.code
            response = error_response(Refusal(e.code, str(e)))
        except Refusal as e:
            code = e.code
            response = error_response(e)
        finally:
            slot.release()
        if not isinstance(response, StreamingResponse):
            self._observe(route, code, started, getattr(request.state, "results", []))
        return response

    def _observe(
        self, route: str, code: str, started: float, results: list[InfillResult] | None = None
    ) -> None:
        seconds = time.monotonic() - started
        self.service.metrics.observe("http", route, code, seconds, results or [])

    def _auth(self, request: Request, route: str) -> Response | None:
        """None when the request carries the token; else the 401, counted."""
        token = self.service.token
        if token is None:
            return None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), token.encode()
        ):
            return None
        self.service.counters.unauthorized += 1
        self._observe(route, "unauthorized", time.monotonic())
        return error_response(Refusal("unauthorized", "a valid bearer token is required"))

    async def _body(self, request: Request, packed: bool) -> dict[str, Any]:
        """The body as a map of text (text.py): at most max_body bytes, within body_timeout_s,
        unless its slot is taken back first for a newcomer (slots.py): then 408 as well."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            raise Refusal("too_large", f"the body is over {self.max_body} bytes")

        async def read() -> bytes:
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body:
                    raise Refusal("too_large", f"the body is over {self.max_body} bytes")
                chunks.append(chunk)
            return b"".join(chunks)

        slot: Slot = request.state.slot
        reading = asyncio.ensure_future(read())
        either: set[asyncio.Future[Any]] = {reading, slot.evicted}
        try:
            await asyncio.wait(
                either, timeout=self.body_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            reading.cancel()  # a no-op once it is done
        if not reading.done() or reading.cancelled():
            if slot.evicted.done():
                self.service.counters.stalled_evictions += 1
                waited = time.monotonic() - slot.started
                raise Refusal("timeout", f"the body was still arriving after {waited:.1f}s "
                              "and its place went to another request")  # fmt: skip
            raise Refusal("timeout", f"the body did not arrive in {self.body_timeout_s:g}s")
        try:
            raw = reading.result()  # raises its Refusal (too large)
        except ClientDisconnect:
            raise Refusal("cancelled", "the client went away before its body arrived") from None
        slot.arrived()
        if packed:
            try:
                return decode_payload(raw)  # its text checked too
            except FrameError as e:
                raise Refusal("bad_request", str(e)) from None
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise Refusal("bad_request", f"malformed JSON: {e}"[:200]) from None
        if not isinstance(body, dict):
            raise Refusal("bad_request", "the body must be a JSON object")
        if (fault := unicode_fault(body)) is not None:  # "\ud800" is JSON, but not text
            raise Refusal("bad_request", fault)
        return body

    async def _rows(
        self, request: Request, ask: Hole, watch: Watch | None = None
    ) -> tuple[Prepared, Done]:
        """Run an ask's rows; a client that goes away before they are done cancels them.
        `watch` hears each fill's leading text as its blocks finish (a stream's)."""
        service = self.service
        pending = Pending(threading.Event())
        work = run_native(service.engine, service.scheduler, service.encoder, pending, ask, watch)
        prepared, done = await self._until_done(request, work, pending)
        request.state.results = [r for r, _ in done]
        return prepared, done

    async def _until_done(self, request: Request, work: Awaitable[T], pending: Pending) -> T:
        """Await the work, unless the client goes away first: then its rows are cancelled
        (queued ones leave the queue, running ones stop at their next step)."""
        service = self.service
        task = asyncio.ensure_future(work)
        task.add_done_callback(_retrieved)  # its error is read below, or nobody waits for it
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not task.done():  # the client went away, or the server is stopping
                task.cancel()
                pending.stop(service.scheduler)
                service.counters.disconnect_cancels += 1
        if not task.done() or task.cancelled():
            raise Refusal("cancelled", "the client went away")
        return await task


def _peer(request: Request) -> str:
    """The client's address, which slots are bounded by (slots.py)."""
    return request.client.host if request.client is not None else ""


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route: 404, a wrong method: 405) as JSON errors."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
    headers = exc.headers if isinstance(exc, HTTPException) else None
    body = {"error": {"code": status, "type": ERROR_TYPES.get(status, "http"), "message": detail}}
    return JSONResponse(body, status_code=status, headers=headers)


def _is_msgpack(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    return kind in (MSGPACK, "application/x-msgpack")


def _answer(result: dict[str, Any], packed: bool) -> Response:
    if packed:
        return Response(msgpack.packb(result, use_bin_type=True), media_type=MSGPACK)
    return JSONResponse(result)


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (the body was read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
