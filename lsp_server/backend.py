"""The engine behind the server: loads it in the background (off the event loop), sends every
fill through the engine's scheduler, makes those calls cancellable, and keeps the counters that
`dllm/status` reports.

Fills go to the in-process engine's scheduler (infill_engine/scheduler.py), the same one the
engine service uses: requests join one running batch between steps, in priority order (invoked,
automatic, command), so a command never holds up a completion and two fills share passes. A load
runs on a thread of its own and cannot be stopped once it has started; the server coalesces
reloads so that a burst of settings changes queues at most one. Loading closes the old engine's
scheduler first (its requests end "cancelled"), so two models are never both in use.

Cancellation is cooperative twice over: asyncio cancels the awaiting handler, and the handler
sets the request's `threading.Event`, which the scheduler drops from the queue or the batch
before its next step.

With `engineAddress` the model runs in a `dllm-infill serve` service instead (remote.py): no
weights are loaded here, only the model's tokenizer and config (`RemoteEngine`) for planning and
context; each fill is one `infill` request, a set cancel flag or a cancelled handler sends
`cancel {id}`, and a lost connection is one message to the user, `failed` state (no
completions) and reconnection with backoff until the service is back.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from infill_engine import Engine, InfillParams, InfillResult, load
from infill_engine.engine import RefineResult
from infill_engine.loader import ModelLoadError
from infill_engine.planner import SpanPlan
from infill_engine.scheduler import PRIORITIES, Cancelled, Priority, SchedulerError
from infill_engine.service import Message, ServiceError

from .context import Tokens
from .options import EngineOptions
from .remote import (
    Refused,
    RemoteClient,
    RemoteEngine,
    RemoteError,
    Unavailable,
    engine_address,
    engine_token,
    load_remote_engine,
)

log = logging.getLogger("dllm-infill-ls.backend")

State = Literal["idle", "loading", "ready", "failed"]
CANCEL_POLL_S = 0.02  # how often a remote request checks its cancel flag while it waits


class NotReady(Exception):
    """The model is not loaded (yet, or at all)."""


class Superseded(Exception):
    """A newer request took over before this one reached the model."""


@dataclass
class Counters:
    requests: int = 0  # engine calls asked for
    model_calls: int = 0  # engine calls that ran the model
    cancelled: int = 0  # calls whose block loop stopped on the cancel flag
    forward_passes: int = 0
    last: dict[str, Any] = field(default_factory=dict)  # the latest call's result, in brief


class Backend:
    def __init__(
        self, log: Callable[[str], None], tell: Callable[[str], None] | None = None
    ) -> None:
        self.log = log
        self.tell = tell or log  # what the user must see (a lost engine service), once
        self.state: State = "idle"
        self.error: str | None = None
        self.engine: Engine | RemoteEngine | None = None
        self.remote: RemoteClient | None = None  # the engine service's client (engineAddress)
        self.backoff_s = (0.5, 10.0)  # reconnecting to the service: first delay, longest delay
        self.options = EngineOptions()
        self.counters = Counters()
        self.loads = 0  # model loads that ran on the worker
        self._lock = threading.Lock()
        self._running: set[threading.Event] = set()  # cancel flags of calls not yet finished
        self._tasks: set[asyncio.Future[None]] = set()  # recording cancelled fills' outcomes

    # -- lifecycle --------------------------------------------------------------------------------
    async def load(self, options: EngineOptions, report: Callable[[str], None]) -> None:
        """Load the model on the worker; never raises (a failure is the `failed` state)."""
        self.state, self.error, self.options = "loading", None, options
        old, self.engine = self.engine, None
        if isinstance(old, Engine):
            old.close()  # its queued and running fills end now ("cancelled")
        self._close_remote()
        if options.address is not None:
            await self._connect(options, report)
            return
        report(f"loading {options.model} on {options.device}")
        t0 = time.perf_counter()
        try:
            engine = await asyncio.to_thread(self._load_now, options)
        except Exception as e:  # any failure, a corrupt file's own error type included
            if isinstance(e, ModelLoadError):
                self.error = str(e)  # says what is wrong with the directory
            else:
                self.error = f"{type(e).__name__}: {e}"
                log.error("loading %s failed", options.model, exc_info=e)
            self.state, self.engine = "failed", None
            return
        self.engine, self.state = engine, "ready"
        self.log(
            f"model {options.model} ready on {engine.device} ({engine.dtype}) "
            f"in {time.perf_counter() - t0:.1f}s"
        )

    def _load_now(self, options: EngineOptions) -> Engine:
        """On a thread of its own."""
        self.loads += 1
        return load(options.model, device=options.device, dtype=options.dtype)

    def close(self) -> None:
        """Stop: queued calls never start, running ones stop at their next pass."""
        with self._lock:
            for cancel in self._running:
                cancel.set()
        self._close_remote()
        if isinstance(self.engine, Engine):
            self.engine.close()

    # -- the engine service (engineAddress) -------------------------------------------------------
    async def _connect(self, options: EngineOptions, report: Callable[[str], None]) -> None:
        assert options.address is not None
        try:
            address = engine_address(options.address)
        except ValueError as e:
            self.state, self.error = "failed", str(e)
            return
        report(f"connecting to the engine service at {address}")
        first, longest = self.backoff_s
        client = RemoteClient(
            address,
            engine_token(options.token),
            self._remote_up,
            self._remote_down,
            backoff_s=first,
            max_backoff_s=longest,
        )
        self.remote = client
        try:
            hello = await client.connect()
        except Refused as e:
            client.close()
            self.state, self.error = "failed", f"engine service {address}: {e}"
            return
        except Unavailable as e:
            self.state = "failed"
            self.error = f"engine service {address} is unreachable ({e}); retrying meanwhile"
            client.retry()
            return
        await self._remote_up(hello)

    async def _remote_up(self, hello: Message) -> None:
        """Connected (first time or again): the local stand-in, then `ready`."""
        client = self.remote
        if client is None:
            return
        first = self.state == "loading"  # the server reports how a load ends; later, we do
        model = str(hello.get("model") or self.options.model)
        engine = self.engine
        if not (isinstance(engine, RemoteEngine) and engine.model == model):
            names = [model, self.options.model]
            try:
                engine = await asyncio.to_thread(load_remote_engine, names, str(client.address))
            except Exception as e:  # a corrupt tokenizer file raises its own error type
                if not isinstance(e, ModelLoadError):
                    log.error("loading the tokenizer of %s failed", model, exc_info=e)
                if client is self.remote:
                    client.close()  # retrying cannot help: the settings must change
                    self.state, self.error, self.engine = "failed", str(e), None
                    if not first:
                        self._tell(self.error)
                return
        if client is not self.remote:
            return  # reloaded while the tokenizer loaded
        self.engine = engine  # kept for the next reconnection
        if not client.connected:
            return  # lost again meanwhile (and told): the retries go on
        self.state, self.error = "ready", None
        if first:
            self.log(
                f"engine service {client.address} ready: model {model}, "
                f"{engine.args.max_positions} positions (tokenizer from {engine.path})"
            )
        else:
            self.log(f"engine service {client.address} is back; completions resume")

    def _remote_down(self, reason: str) -> None:
        """The connection is lost (or a reconnection refused): one message, no completions."""
        client = self.remote
        if client is None or client.closed:
            return
        self.state = "failed"
        self.error = (
            f"engine service {client.address}: {reason}; no completions until it is back "
            "(reconnecting)"
        )
        self._tell(self.error)

    def _tell(self, message: str) -> None:
        try:
            self.tell(message)
        except Exception:  # no client to tell (any more): the log has it
            self.log(message)

    def _close_remote(self) -> None:
        if self.remote is not None:
            self.remote.close()
            self.remote = None

    async def _remote_infill(
        self,
        prefix: str,
        suffix: str,
        params: list[InfillParams],
        cancel: threading.Event,
        plan: SpanPlan | None,
        priority: Priority,
    ) -> list[InfillResult]:
        """One `infill` request per params."""
        fields: dict[str, Any] = {
            "prefix": prefix,
            "suffix": suffix,
            "priority": priority,
        }
        if plan is not None:
            stop = asdict(plan.stop)
            fields["plan"] = {"span": plan.span, "max_span": plan.max_span, "stop": stop}
        t0 = time.perf_counter()
        bodies = [{**fields, "params": asdict(p)} for p in params]
        replies = await self._remote_call("infill", bodies, cancel)
        results = [_result(reply) for reply in replies]
        self._record(results, (time.perf_counter() - t0) * 1000)
        with self._lock:
            self.counters.last["queue_ms"] = replies[0].get("queue_ms")
            self.counters.last["batch_size"] = replies[0].get("batch_size")
        return results

    async def _remote_call(
        self, kind: str, bodies: list[dict[str, Any]], cancel: threading.Event
    ) -> list[dict[str, Any]]:
        """Send one request per body and wait for every reply's result. A set cancel flag (or
        a cancelled caller) sends `cancel {id}` for each one still in flight; a `cancelled`
        reply is `Superseded`, a lost connection `NotReady`, another error `RemoteError`."""
        client = self.remote
        if client is None or not client.connected:
            raise NotReady(self.error or "the engine service is not connected")
        if cancel.is_set():
            raise Superseded
        sent: list[tuple[int, asyncio.Future[Message]]] = []

        def cancel_sent() -> None:
            for rid, fut in sent:
                if not fut.done():
                    client.cancel(rid)

        try:
            self._in_flight(cancel)
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
            raise NotReady(self.error or f"the engine service is not connected ({e})") from None
        finally:
            self._finished(cancel)
        replies = []
        lost = None
        for _, fut in sent:  # every outcome is retrieved, so none is reported as unhandled
            if (exc := fut.exception()) is not None:
                lost = exc
            else:
                replies.append(fut.result())
        if lost is not None:
            raise NotReady(self.error or f"the engine service is not connected ({lost})")
        results = []
        for reply in replies:
            err = reply.get("error")
            if err is not None:
                code, message = str(err.get("code")), str(err.get("message"))
                if code == "cancelled":
                    with self._lock:
                        self.counters.cancelled += 1
                    raise Superseded
                raise RemoteError(f"engine service: {ServiceError(code, message)}", code)
            results.append(dict(reply.get("result") or {}))
        return results

    def status(self) -> dict[str, Any]:
        e = self.engine
        with self._lock:
            counters = asdict(self.counters)
        out = {
            "state": self.state,
            "error": self.error,
            "model": self.options.model,
            "device": str(e.device) if isinstance(e, Engine) else None,
            "dtype": str(e.dtype).removeprefix("torch.") if isinstance(e, Engine) else None,
            "family": e.family if e else None,
            "model_threshold": e.threshold if e else None,  # τ when decode.threshold is null
            "loads": self.loads,
            **counters,
        }
        if self.options.address is not None:
            out["engine_address"] = self.options.address
            out["service_model"] = e.model if isinstance(e, RemoteEngine) else None
            out["reconnects"] = self.remote.reconnects if self.remote is not None else 0
        return out

    def tokenize(self, text: str) -> Tokens:
        """Text's ids and their character spans under the model's tokenizer: the one encode of
        a request's context (context.py), whose ids go to the engine as they are."""
        engine = self.ready_engine()
        tok = engine.tokenizer
        if tok is None:
            raise NotReady("the model has no tokenizer")
        fast = getattr(tok, "backend_tokenizer", None)  # the Rust tokenizer: no wrapper cost
        if fast is not None:
            enc = fast.encode(text, add_special_tokens=False)
            return Tokens(enc.ids, enc.offsets)
        out = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        spans = [(int(a), int(b)) for a, b in out["offset_mapping"]]
        return Tokens(list(out["input_ids"]), spans)

    # -- model calls ------------------------------------------------------------------------------
    def ready_engine(self) -> Engine | RemoteEngine:
        if self.engine is None or self.state != "ready":
            raise NotReady(self.error or f"the model is {self.state}")
        return self.engine

    async def infill(
        self,
        prefix: str,
        suffix: str,
        params: InfillParams,
        cancel: threading.Event,
        plan: SpanPlan | None = None,
        *,
        priority: Priority,
        ids: tuple[Sequence[int], Sequence[int]] | None = None,
    ) -> InfillResult:
        results = await self.infill_many(
            prefix, suffix, [params], cancel, plan, priority=priority, ids=ids
        )
        return results[0]

    async def infill_many(
        self,
        prefix: str,
        suffix: str,
        params: list[InfillParams],
        cancel: threading.Event,
        plan: SpanPlan | None = None,
        *,
        priority: Priority,
        ids: tuple[Sequence[int], Sequence[int]] | None = None,
    ) -> list[InfillResult]:
        """Several fills of one hole (say, several span lengths), encoded once and decoded as
        one batch. With an engine service: one request each, batched by the service.
        `priority` is the caller's to say (`invoked`, `automatic`, `command`): it is never
        guessed from the request's shape. `ids`: prefix and suffix as the model's ids, when the
        caller tokenized them already (context.py): the in-process engine then does not."""
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {list(PRIORITIES)}, got {priority!r}")
        engine = self.ready_engine()
        if isinstance(engine, RemoteEngine):
            return await self._remote_infill(prefix, suffix, params, cancel, plan, priority)
        self._in_flight(cancel)
        t0 = time.perf_counter()
        scheduler = engine.scheduler()
        try:
            if cancel.is_set():
                raise Superseded
            if ids is None:  # encoded off the event loop (a long document takes milliseconds)
                requests = await asyncio.to_thread(
                    engine.requests, prefix, suffix, params, plan, cancel
                )
            else:  # the context's ids: nothing to encode, no thread to hand over to
                requests = engine.requests(prefix, suffix, params, plan, cancel, ids)
            tickets = [scheduler.submit_request(r, priority=priority) for r in requests]
            # shielded: a cancelled handler must not cancel the tickets' futures, whose
            # results (stop_reason "cancelled") the counters still record
            waits = [asyncio.wrap_future(t.future) for t in tickets]
            try:
                # gather retrieves every outcome, so none is logged as never retrieved
                results = list(await asyncio.gather(*(asyncio.shield(w) for w in waits)))
            except asyncio.CancelledError:
                cancel.set()  # queued: never starts; running: leaves at its next step
                for t in tickets:
                    scheduler.cancel(t)
                task = asyncio.ensure_future(self._record_later(waits, t0))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                raise
        except Cancelled:
            raise Superseded from None  # superseded while it queued: no model call at all
        except SchedulerError as e:  # busy, deadline: the server logs it, no completion
            raise RuntimeError(f"engine: {e}") from None
        finally:
            self._finished(cancel)
        self._record(results, (time.perf_counter() - t0) * 1000)
        return results

    async def _record_later(self, waits: list[asyncio.Future[InfillResult]], t0: float) -> None:
        """Record how a fill whose handler was cancelled ended (it stops at its next step)."""
        results = []
        for w in waits:
            try:
                results.append(await w)
            except Exception:  # cancelled while queued, or failed: no pass to count
                continue
        if results:
            self._record(results, (time.perf_counter() - t0) * 1000)

    async def refine(
        self,
        prefix: str,
        text: str,
        suffix: str,
        fraction: float,
        params: InfillParams,
        cancel: threading.Event,
    ) -> RefineResult:
        engine = self.ready_engine()
        if isinstance(engine, RemoteEngine):
            body = {"prefix": prefix, "text": text, "suffix": suffix, "fraction": fraction}
            t0 = time.perf_counter()
            try:
                (r,) = await self._remote_call(
                    "refine", [{**body, "params": asdict(params)}], cancel
                )
            except RemoteError as e:
                if e.code == "unknown_method":  # a service from before refine was in it
                    raise RemoteError(
                        "the engine service does not offer refine (it predates it); "
                        "upgrade it, or clear engineAddress to refine in-process"
                    ) from None
                raise
            result = RefineResult(
                text=str(r.get("text", "")),
                remasked=[int(i) for i in r.get("remasked", [])],
                changed=int(r.get("changed", 0)),
                nfe=int(r.get("nfe", 0)),
                stop_reason=str(r.get("stop_reason", "span_full")),
                token_ids=[],
            )
            self._record(result, (time.perf_counter() - t0) * 1000)
            return result
        self._in_flight(cancel)

        def work() -> RefineResult:
            # A refine is one loop of its own; it takes turns with the scheduler's steps on the
            # engine's lock.
            t0 = time.perf_counter()
            result = engine.refine(prefix, text, suffix, fraction, params, cancel)
            self._record(result, (time.perf_counter() - t0) * 1000)
            return result

        try:
            return await asyncio.to_thread(work)
        except asyncio.CancelledError:
            cancel.set()  # the loop stops at its next pass; its result is dropped
            raise
        finally:
            self._finished(cancel)

    def _in_flight(self, cancel: threading.Event) -> None:
        """A model call starts: counted, and its cancel flag set if the server closes."""
        with self._lock:
            self.counters.requests += 1
            self._running.add(cancel)

    def _finished(self, cancel: threading.Event) -> None:
        with self._lock:
            self._running.discard(cancel)

    def _record(self, results: Any, call_ms: float) -> None:
        batch = results if isinstance(results, list) else [results]
        result = batch[0]
        stop = getattr(result, "stop_reason", None)
        nfe = max(int(getattr(r, "nfe", 0)) for r in batch)  # a batch's rows share passes
        with self._lock:
            c = self.counters
            c.model_calls += 1
            c.forward_passes += nfe
            c.cancelled += stop == "cancelled"
            c.last = {
                "stop_reason": stop,
                "nfe": nfe,
                "tokens": getattr(result, "tokens", None),
                "span": getattr(result, "span", None),
                "elapsed_ms": getattr(result, "elapsed_ms", None),  # the block loop alone
                "call_ms": round(call_ms, 3),  # the whole engine call, tokenization included
            }


def _result(r: dict[str, Any]) -> InfillResult:
    """An `infill` reply's result as the engine's InfillResult (no token ids on the wire)."""
    return InfillResult(
        text=str(r.get("text", "")),
        tokens=int(r.get("tokens", 0)),
        nfe_full=int(r.get("nfe_full", 0)),
        nfe_block=int(r.get("nfe_block", 0)),
        elapsed_ms=float(r.get("elapsed_ms", 0.0)),
        stop_reason=r.get("stop_reason", "span_full"),
        span=int(r.get("span", 0)),
        grown=int(r.get("grown", 0)),
        edits=int(r.get("edits", 0)),
    )
