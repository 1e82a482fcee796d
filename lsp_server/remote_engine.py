"""The engine service (`engineAddress`) as an `EngineClient` (engine_client.py): the model runs
in a `dllm-infill serve` service, reached through remote.py's `RemoteClient`.

No weights are loaded here, only the model's tokenizer and config (`RemoteEngine`, the stand-in
for `Engine`) for planning and context. Each fill is one `infill` request per params, a refine
one `refine` request; a set cancel flag or a cancelled caller sends `cancel {id}`. This client
also owns how the connection stands: a lost connection is one message to the user, `failed`
state (no completions) and reconnection with backoff until the service is back, which it writes
to its `Host` (the backend) without importing it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from infill_engine import Engine, InfillResult
from infill_engine.engine import RefineResult
from infill_engine.loader import (
    ModelLoadError,
    load_tokenizer,
    pick_family,
    read_config,
    read_threshold,
    resolve_model_dir,
)
from infill_engine.models import ModelArgs
from infill_engine.params import threshold_or_default
from infill_engine.service import Message, ServiceError

from .engine_client import Fill, Ledger, NotReady, Refinement, State, Superseded
from .options import EngineOptions
from .remote import Refused, RemoteClient, RemoteError, Unavailable, engine_address, engine_token

log = logging.getLogger("dllm-infill-ls.backend")  # the backend's log: this is a part of it

CANCEL_POLL_S = 0.02  # how often a remote request checks its cancel flag while it waits


# -- what stays local: the stand-in -----------------------------------------------------------
@dataclass
class RemoteEngine:
    """The stand-in for `Engine` in remote mode: tokenizer and positions, no weights."""

    model: str  # as the service names it
    path: Path  # the directory the tokenizer and config.json came from
    tokenizer: Any
    args: ModelArgs
    family: str
    threshold: float  # the τ the directory recommends (what the service uses by default)
    address: str

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def load_remote_engine(names: list[str], address: str) -> RemoteEngine:
    """The tokenizer and config of the first of `names` (the service's model, then the user's
    `model` setting) found on this machine. Blocking: run it off the event loop."""
    reasons = []
    for name in dict.fromkeys(names):
        try:
            path = resolve_model_dir(name)
            config = read_config(path)
            family = pick_family(config, qwen2_as_diffusion=True)
            try:
                args = family.parse_args(config)
            except (TypeError, ValueError) as e:
                raise ModelLoadError(f"{path / 'config.json'}: {e}") from e
            tokenizer = load_tokenizer(path)
            threshold = read_threshold(path)
        except (ModelLoadError, OSError) as e:
            reasons.append(str(e))
            continue
        tokenizer.model_max_length = 1 << 60  # the context is cut by token spans, not here
        tau = threshold_or_default(threshold)
        return RemoteEngine(names[0], path, tokenizer, args, family.name, tau, address)
    raise ModelLoadError(
        f"the engine service serves model {names[0]!r}, and its tokenizer is needed here too: "
        + "; ".join(reasons)
        + " (set `model` to a local copy of the model's directory)"
    )


class Host(Protocol):
    """The backend as its service client sees it: how the engine stands (which the connection's
    coming and going changes), its log, and whom to tell what the user must see."""

    state: State
    error: str | None
    engine: Engine | RemoteEngine | None
    log: Callable[[str], None]
    tell: Callable[[str], None]


class RemoteEngineClient:
    """One `engineAddress` setting's service: `connect` once, then it keeps itself connected
    (`backoff_s`: first and longest delay between attempts) until closed."""

    def __init__(
        self, host: Host, options: EngineOptions, ledger: Ledger, backoff_s: tuple[float, float]
    ) -> None:
        self.host = host
        self.options = options
        self.ledger = ledger
        self.backoff_s = backoff_s
        self.remote: RemoteClient | None = None  # None: a bad address, or closed

    # -- the connection ---------------------------------------------------------------------------
    async def connect(self, report: Callable[[str], None]) -> None:
        """The first attempt, and how the load ends (the host's state); never raises."""
        host, options = self.host, self.options
        assert options.address is not None
        try:
            address = engine_address(options.address)
        except ValueError as e:
            host.state, host.error = "failed", str(e)
            return
        report(f"connecting to the engine service at {address}")
        first, longest = self.backoff_s
        client = RemoteClient(
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
            host.state, host.error = "failed", f"engine service {address}: {e}"
            return
        except Unavailable as e:
            host.state = "failed"
            host.error = f"engine service {address} is unreachable ({e}); retrying meanwhile"
            client.retry()
            return
        await self._up(hello)

    async def _up(self, hello: Message) -> None:
        """Connected (first time or again): the local stand-in, then `ready`."""
        client, host = self.remote, self.host
        if client is None:
            return
        first = host.state == "loading"  # the server reports how a load ends; later, we do
        model = str(hello.get("model") or self.options.model)
        engine = host.engine
        if not (isinstance(engine, RemoteEngine) and engine.model == model):
            names = [model, self.options.model]
            try:
                engine = await asyncio.to_thread(load_remote_engine, names, str(client.address))
            except Exception as e:  # a corrupt tokenizer file raises its own error type
                if not isinstance(e, ModelLoadError):
                    log.error("loading the tokenizer of %s failed", model, exc_info=e)
                if client is self.remote:
                    client.close()  # retrying cannot help: the settings must change
                    host.state, host.error, host.engine = "failed", str(e), None
                    if not first:
                        self._tell(host.error)
                return
        if client is not self.remote:
            return  # reloaded (this client closed) while the tokenizer loaded
        host.engine = engine  # kept for the next reconnection
        if not client.connected:
            return  # lost again meanwhile (and told): the retries go on
        host.state, host.error = "ready", None
        if first:
            host.log(
                f"engine service {client.address} ready: model {model}, "
                f"{engine.args.max_positions} positions (tokenizer from {engine.path})"
            )
        else:
            host.log(f"engine service {client.address} is back; completions resume")

    def _down(self, reason: str) -> None:
        """The connection is lost (or a reconnection refused): one message, no completions."""
        client, host = self.remote, self.host
        if client is None or client.closed:
            return
        host.state = "failed"
        host.error = (
            f"engine service {client.address}: {reason}; no completions until it is back "
            "(reconnecting)"
        )
        self._tell(host.error)

    def _tell(self, message: str) -> None:
        try:
            self.host.tell(message)
        except Exception:  # no client to tell (any more): the log has it
            self.host.log(message)

    def close(self) -> None:
        """Stop retrying and drop the connection; requests in flight end `NotReady`."""
        if self.remote is not None:
            self.remote.close()
            self.remote = None

    def status(self) -> dict[str, Any]:
        e = self.host.engine
        return {
            "engine_address": self.options.address,
            "service_model": e.model if isinstance(e, RemoteEngine) else None,
            "reconnects": self.remote.reconnects if self.remote is not None else 0,
        }

    # -- requests ---------------------------------------------------------------------------------
    async def infill_many(self, fill: Fill) -> list[InfillResult]:
        """One `infill` request per params, batched by the service (`ids` stay here: the
        service encodes the text with its own tokenizer)."""
        fields: dict[str, Any] = {
            "prefix": fill.prefix,
            "suffix": fill.suffix,
            "priority": fill.priority,
        }
        if (plan := fill.plan) is not None:
            stop = asdict(plan.stop)
            fields["plan"] = {"span": plan.span, "max_span": plan.max_span, "stop": stop}
        t0 = time.perf_counter()
        bodies = [{**fields, "params": asdict(p)} for p in fill.params]
        replies = await self._call("infill", bodies, fill.cancel)
        results = [_result(reply) for reply in replies]
        queue = {"queue_ms": replies[0].get("queue_ms"), "batch_size": replies[0].get("batch_size")}
        self.ledger.record(results, (time.perf_counter() - t0) * 1000, **queue)
        return results

    async def refine(self, job: Refinement) -> RefineResult:
        body: dict[str, Any] = {"prefix": job.prefix, "text": job.text, "suffix": job.suffix}
        body.update(fraction=job.fraction, params=asdict(job.params))
        t0 = time.perf_counter()
        try:
            (r,) = await self._call("refine", [body], job.cancel)
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
            raise NotReady(self.host.error or "the engine service is not connected")
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
                error = self.host.error or f"the engine service is not connected ({e})"
                raise NotReady(error) from None
        replies = []
        lost = None
        for _, fut in sent:  # every outcome is retrieved, so none is reported as unhandled
            if (exc := fut.exception()) is not None:
                lost = exc
            else:
                replies.append(fut.result())
        if lost is not None:
            raise NotReady(self.host.error or f"the engine service is not connected ({lost})")
        results = []
        for reply in replies:
            err = reply.get("error")
            if err is not None:
                code, message = str(err.get("code")), str(err.get("message"))
                if code == "cancelled":
                    self.ledger.superseded()
                    raise Superseded
                raise RemoteError(f"engine service: {ServiceError(code, message)}", code)
            results.append(dict(reply.get("result") or {}))
        return results


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
