"""The engine service (`engineAddress`) as an `EngineClient` (engine_client.py): the model runs
in a `dllm-infill serve` service, reached through link.py's `RemoteClient` (`unix:`, `tcp:`)
or http_link.py's `HttpClient` (`http://`).

A thin client: nothing of the model is loaded here (no tokenizer, no config, no weights, no
torch). Each hole is one `v2/infill` request with a window of the document around it
(window.py); the service plans the span, cuts and tokenizes the context, decodes every
candidate and says which part of the window the model saw. A refine is one `refine` request
with the same window and the hole's budgets: the service cuts its context by tokens as it cuts
a fill's, and as the in-process engine does (service/refine.py). A set cancel flag or a
cancelled caller sends `cancel {id}` (over HTTP the request is dropped, which the service takes
as a disconnect and cancels its rows).

A reply is hostile input (untrusted.py): one that does not have the shape of a reply is a
`bad_reply` error, a fill's text longer than MAX_TEXT_CHARS a `too_large` one, and the
service's own messages and model name are `shown` (no control characters, 200 characters).

This client also watches how the connection stands: a lost connection is one message to the
user, `failed` state (no completions) and reconnection with backoff until the service is back,
which it reports through its `Port`; the backend writes the state.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

from infill_engine.drafts import Draft
from infill_engine.fields import is_int
from infill_engine.params import InfillParams, InfillResult, RefineResult
from infill_engine.service import Message, ServiceError

from ..options import EngineOptions
from .engine_client import Filled, Hole, NotReady, Port, Superseded
from .http_link import HttpClient
from .link import (
    Link,
    Refused,
    RemoteClient,
    RemoteError,
    Unavailable,
    engine_address,
    engine_token,
)
from .untrusted import BadAnswer, check_text, shown
from .window import window

log = logging.getLogger("dllm-infill-ls.backend")  # the backend's log: this is a part of it

CANCEL_POLL_S = 0.02  # how often a remote request checks its cancel flag while it waits
NATIVE = "v2/infill"
MAX_CANDIDATES = 4  # the service's limit (request.candidate_spans gives at most three anyway)


class RemoteEngineClient:
    """One `engineAddress` setting's service: `connect` once, then it keeps itself connected
    (`backoff_s`: first and longest delay between attempts) until closed."""

    def __init__(self, port: Port, options: EngineOptions, backoff_s: tuple[float, float]) -> None:
        self.port = port
        self.options = options
        self.ledger = port.ledger
        self.backoff_s = backoff_s
        self.remote: Link | None = None  # None: a bad address, or closed
        self.hello: Message = {}  # the service's latest hello: its model, its limits

    # -- the connection ---------------------------------------------------------------------------
    async def connect(self, report: Callable[[str], None]) -> None:
        """The first attempt, and how the load ends (reported); never raises."""
        port, options = self.port, self.options
        assert options.address is not None
        try:
            address = engine_address(options.address)
        except ValueError as e:
            port.failed(str(e))
            return
        report(f"connecting to the engine service at {address}")
        first, longest = self.backoff_s
        transport = HttpClient if address.kind == "http" else RemoteClient
        client = transport(
            address,
            engine_token(options.token),
            self._up,
            self._down,
            backoff_s=first,
            max_backoff_s=longest,
        )
        self.remote = client
        try:
            hello = await client.connect()
        except Refused as e:
            client.close()
            port.failed(f"engine service {address}: {e}")
            return
        except Unavailable as e:
            port.failed(f"engine service {address} is unreachable ({e}); retrying meanwhile")
            client.retry()
            return
        await self._up(hello)

    async def _up(self, hello: Message) -> None:
        """Connected (first time or again): `ready`. Nothing to load: the service plans."""
        client, port = self.remote, self.port
        if client is None or not client.connected:
            return  # closed, or lost again meanwhile (and told): the retries go on
        first = port.state == "loading"  # the server reports how a load ends; later, we do
        self.hello = hello
        if first:
            port.ready(f"engine service {client.address} ready: model {self.model}")
        else:
            port.ready(f"engine service {client.address} is back; completions resume")

    def _down(self, reason: str) -> None:
        """The connection is lost (or a reconnection refused): one message, no completions."""
        client = self.remote
        if client is None or client.closed:
            return
        self.port.failed(
            f"engine service {client.address}: {reason}; no completions until it is back "
            "(reconnecting)",
            tell=True,
        )

    def close(self) -> None:
        """Stop retrying and drop the connection; requests in flight end `NotReady`."""
        if self.remote is not None:
            self.remote.close()
            self.remote = None

    @property
    def model(self) -> str | None:
        """The model the service names in its hello."""
        model = self.hello.get("model")
        return shown(model) if model else None

    @property
    def positions(self) -> int | None:
        """The model's positions, when the service's hello says (`max_positions`)."""
        n = self.hello.get("max_positions")
        return n if is_int(n) and n > 0 else None

    def status(self) -> dict[str, Any]:
        return {
            "engine_address": self.options.address,
            "service_model": self.model,
            "reconnects": self.remote.reconnects if self.remote is not None else 0,
        }

    # -- requests ---------------------------------------------------------------------------------
    async def fill(self, hole: Hole) -> Filled:
        """One `v2/infill` request: a window of the text around the hole (window.py), whose
        offsets the reply's context range is mapped back from."""
        lo, hi = window(
            hole.text,
            hole.offset,
            hole.after,
            hole.prefix_tokens,
            hole.suffix_tokens,
            hole.language_id,
            hole.tree,
        )
        body = native_body(hole, lo, hi)
        t0 = time.perf_counter()
        try:
            (reply,) = await self._call(NATIVE, [body], hole.cancel)
        except RemoteError as e:
            if e.code == "unknown_method":  # a service from before the native call
                raise RemoteError(
                    f"the engine service does not offer {NATIVE} (it predates it); upgrade it",
                    e.code,
                ) from None
            raise
        items = reply.get("items") or []
        if not items:
            raise RemoteError("engine service: a v2/infill reply without items", "internal")
        try:
            results = [_result(item) for item in items]
            plan, ctx = dict(reply.get("plan") or {}), dict(reply.get("context") or {})
            kind = shown(plan.get("kind", ""), 40)
            files = tuple(shown(f) for f in ctx.get("extra") or ())
            n = int(ctx.get("extra_tokens", 0))
            more = {
                "queue_ms": items[0].get("queue_ms"),
                "batch_size": items[0].get("batch_size"),
                "extra_files": list(files),
                "extra_tokens": n,
            }
            start = lo + int(ctx.get("start", hole.offset - lo))
            stop = lo + int(ctx.get("end", hole.after - lo))
            span = int(plan.get("span", 0))
        except BadAnswer as e:
            raise RemoteError(f"engine service: {e}", e.code) from None
        except (TypeError, ValueError, AttributeError, LookupError):
            raise RemoteError(
                "engine service: a v2/infill reply of the wrong shape", "bad_reply"
            ) from None
        self.ledger.record(results, (time.perf_counter() - t0) * 1000, kind=kind, **more)
        found = tuple(_drafts(reply.get("drafts")))
        return Filled(results, kind, span, start, stop, files, n, found)

    async def refine(self, hole: Hole, fraction: float) -> RefineResult:
        """The selection and a window around it (window.py), with the hole's budgets: the
        service cuts the context by tokens, as it cuts a fill's (service/refine.py)."""
        lo, hi = window(hole.text, hole.offset, hole.after, hole.prefix_tokens,
                        hole.suffix_tokens, hole.language_id, hole.tree)  # fmt: skip
        body: dict[str, Any] = {
            "prefix": hole.text[lo : hole.offset],
            "text": hole.text[hole.offset : hole.after],
            "suffix": hole.text[hole.after : hi],
            "languageId": hole.language_id or "plaintext",
            "prefixTokens": hole.prefix_tokens,
            "suffixTokens": hole.suffix_tokens,
            "fraction": fraction,
            "params": wire_params(hole.params),
        }
        t0 = time.perf_counter()
        try:
            (r,) = await self._call("refine", [body], hole.cancel)
        except RemoteError as e:
            if e.code == "unknown_method":  # a service from before refine
                raise RemoteError(
                    "the engine service does not offer refine (it predates it); update it, "
                    "or clear engineAddress to refine in-process",
                    e.code,
                ) from None
            raise
        try:
            result = RefineResult(
                text=check_text(str(r.get("text", ""))),
                remasked=[int(i) for i in r.get("remasked", [])],
                changed=int(r.get("changed", 0)),
                nfe=int(r.get("nfe", 0)),
                stop_reason=shown(r.get("stop_reason", "span_full"), 40),
                token_ids=[],
            )
        except BadAnswer as e:
            raise RemoteError(f"engine service: {e}", e.code) from None
        except (TypeError, ValueError, AttributeError):
            raise RemoteError(
                "engine service: a refine reply of the wrong shape", "bad_reply"
            ) from None
        self.ledger.record(result, (time.perf_counter() - t0) * 1000)
        return result

    async def _call(
        self, kind: str, bodies: list[dict[str, Any]], cancel: threading.Event
    ) -> list[dict[str, Any]]:
        """Send one request per body and wait for every reply's result. A set cancel flag (or
        a cancelled caller) sends `cancel {id}` for each one still in flight; a `cancelled`
        reply is `Superseded`, a lost connection `NotReady`, another error `RemoteError`."""
        client = self.remote
        if client is None or not client.connected:
            raise NotReady(self.port.error or "the engine service is not connected")
        if cancel.is_set():
            raise Superseded
        sent: list[tuple[int, asyncio.Future[Message]]] = []

        def cancel_sent() -> None:
            for rid, fut in sent:
                if not fut.done():
                    client.cancel(rid)

        with self.ledger.call(cancel):
            try:
                for body in bodies:
                    sent.append(client.send(kind, body))
                waiting = {fut for _, fut in sent}
                told = False
                while waiting:
                    _, waiting = await asyncio.wait(waiting, timeout=CANCEL_POLL_S)
                    if waiting and cancel.is_set() and not told:
                        told = True  # a newer request took over: the service drops these
                        cancel_sent()
            except asyncio.CancelledError:
                cancel.set()
                cancel_sent()
                raise
            except Unavailable as e:
                error = self.port.error or f"the engine service is not connected ({e})"
                raise NotReady(error) from None
        replies = []
        lost = None
        for _, fut in sent:  # every outcome is retrieved, so none is reported as unhandled
            if (exc := fut.exception()) is not None:
                lost = exc
            else:
                replies.append(fut.result())
        if lost is not None:
            raise NotReady(self.port.error or f"the engine service is not connected ({lost})")
        results = []
        for reply in replies:
            err = reply.get("error")
            if err is not None:
                err = err if isinstance(err, dict) else {"message": err}
                code, message = shown(err.get("code"), 40), shown(err.get("message"))
                if code == "cancelled":
                    self.ledger.superseded()
                    raise Superseded
                raise RemoteError(f"engine service: {ServiceError(code, message)}", code)
            results.append(dict(reply.get("result") or {}))
        return results


def native_body(hole: Hole, lo: int = 0, hi: int | None = None) -> dict[str, Any]:
    """The hole as a `v2/infill` request, its text the window [lo, hi): what the service's
    `parse_native` reads back into the same hole (the window's offsets aside)."""
    hi = len(hole.text) if hi is None else hi
    body: dict[str, Any] = {
        "text": hole.text[lo:hi],
        "offset": hole.offset - lo,
        "languageId": hole.language_id or "plaintext",
        "trigger": hole.priority,
        "candidates": max(1, min(hole.candidates, MAX_CANDIDATES)),
        "prefixTokens": hole.prefix_tokens,
        "suffixTokens": hole.suffix_tokens,
        "params": wire_params(hole.params),
        "draft": hole.drafting,
    }
    if hole.end is not None:
        body["end"] = hole.end - lo
    if hole.extra and hole.extra_tokens > 0:
        body["extra"] = [{"path": p, "text": t} for p, t in hole.extra]
        body["extraTokens"] = hole.extra_tokens
    if hole.drafts:
        body["drafts"] = [d.wire() for d in hole.drafts]
    if hole.renamed:
        body["renamed"] = [list(pair) for pair in hole.renamed]
    if hole.deadline_ms is not None:
        body["deadline_ms"] = hole.deadline_ms
    return body


def wire_params(p: InfillParams) -> dict[str, Any]:
    """InfillParams as the wire's `params` map: `span` only when the user fixed one."""
    fields = asdict(p)
    if fields["span"] == "auto":
        del fields["span"]
    return fields


def _result(r: dict[str, Any]) -> InfillResult:
    """A reply's item as the engine's InfillResult (no token ids on the wire)."""
    return InfillResult(
        text=check_text(str(r.get("text", ""))),
        tokens=int(r.get("tokens", 0)),
        nfe_full=int(r.get("nfe_full", 0)),
        nfe_block=int(r.get("nfe_block", 0)),
        elapsed_ms=float(r.get("elapsed_ms", 0.0)),
        stop_reason=shown(r.get("stop_reason", "span_full"), 40),  # type: ignore[arg-type]
        span=int(r.get("span", 0)),
        grown=int(r.get("grown", 0)),
        edits=int(r.get("edits", 0)),
    )


def _drafts(raw: Any) -> Iterator[Draft]:
    """The reply's drafts (a service from before drafts sends none); one the service sent
    malformed is left out, not the reply."""
    for item in raw if isinstance(raw, list) else ():
        try:
            yield Draft.from_wire(item)
        except ValueError:
            continue
