"""An OpenAI-compatible fill-in-the-middle API as the language server's engine (`EngineClient`,
engine_client.py): `engineAddress: "openai+https://api.inceptionlabs.ai/v1"` for Mercury Coder,
or any server with OpenAI's `/v1/completions` and its `suffix` (our own `dllm-infill serve
--listen http://...`, vLLM, llama.cpp's server).

The address is the API's base URL behind `openai+`. A request goes to `{base}/fim/completions`
(Inception's route: `model`, `prompt`, `suffix`, `max_tokens`, `stream`), and, where that route
answers 404, to `{base}/completions` with the same fields, which is then kept; an address that
ends in one of the two routes uses that one only. The model is the `engineModel` setting, else
the first that `GET {base}/models` lists. The key is sent as `Authorization: Bearer`: the
`engineToken` setting, else the environment variable `engineApiKeyEnv` names (`DLLM_API_KEY`);
it is never logged, echoed or shown in `dllm/status`.

What the API's model cannot do stays on this side, as with our own engine: the span planner
(infill_engine/planner/) decides the hole's kind and its length, sent as `max_tokens`; the
context is cut to the budgets (counted in approximate tokens: word and punctuation pieces, as
there is no tokenizer of the remote model here); the plan's stop rule cuts the streamed text
where the construct ends (and stops reading there); the cursor rules, the syntax-checked
finish, de-duplication and the gate run on the result in completion/inline.py and
infill_engine/finish.

The answer is hostile input (untrusted.py): at most MAX_ANSWER_BYTES of it is read, its text at
most MAX_TEXT_CHARS, all within one deadline (DEADLINE_S, not a wait per read), and what of it is
logged or shown is `shown` (no control characters, at most 200 characters).

Failures, as a user expects them:
- no answer (connection refused): `NotReady` now; at start-up the client retries with backoff
  until the API is up;
- no whole answer within DEADLINE_S: `NotReady`, and a pause as for a 5xx;
- 401 / 403: the key is refused; one message, no completions until the settings change;
- 429: no request until its `Retry-After` (seconds or an HTTP date, at most 60 s; else the
  backoff) has passed;
- 5xx: no request for a backoff that doubles (1 s up to 60 s), cleared by the next success;
- another 4xx, an answer too large or not JSON: an error with the API's own message (a wrong
  model name, say), or ours.
A message goes to the user once per episode, and once more when completions resume.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import httpx

from infill_engine import planner
from infill_engine.params import InfillResult, RefineResult, StopReason
from infill_engine.stop import StopRule

from ..options import FIM_PREFIX, EngineOptions
from .backoff import Backoff, Retry
from .engine_client import Filled, Hole, NotReady, Port, Superseded
from .engine_service import CANCEL_POLL_S
from .link import RemoteError
from .untrusted import (
    BadAnswer,
    check_text,
    parse_json,
    read_body,
    read_lines,
    shown,
)
from .window import window

log = logging.getLogger("dllm-infill-ls.backend")  # a part of the backend, as engine_service is

ROUTES = ("/fim/completions", "/completions")  # Inception's FIM route, then OpenAI's
DEADLINE_S = 10.0  # a whole request, connecting to the last byte: a FIM call takes under 1 s
CONNECT_TIMEOUT_S = 5.0
BACKOFF_S = (1.0, 60.0)  # after a 5xx or a 429 without Retry-After: first and longest pause
CONTEXT_TOKENS = 32768  # the positions the planner budgets against (Mercury's context window)
_PIECE = re.compile(r"\w+|[^\w\s]|\n|[ \t]+")  # approximate tokens: words, marks, white space


@dataclass(frozen=True)
class FimAddress:
    base: str  # the API's base URL, e.g. https://api.inceptionlabs.ai/v1
    route: str | None  # the one route the address names; None: try ROUTES in order


def parse_fim_address(address: str) -> FimAddress:
    """An `openai+URL` engineAddress (checked by options.normalize_fim_address)."""
    url = address.removeprefix(FIM_PREFIX).rstrip("/")
    for route in ROUTES:
        if url.endswith(route):
            return FimAddress(url[: -len(route)], route)
    return FimAddress(url, None)


def api_key(options: EngineOptions, env: Mapping[str, str] | None = None) -> str | None:
    """engineToken, else the variable engineApiKeyEnv names, else none."""
    if options.token:
        return options.token
    return (os.environ if env is None else env).get(options.key_env) or None


def approx_encode(text: str) -> list[int]:
    """As many ids as `text` has approximate tokens (the planner counts, it never reads them)."""
    return [0] * len(_PIECE.findall(text))


def cut_context(
    text: str, lo: int, offset: int, after: int, hi: int, pre: int, suf: int
) -> tuple[int, int]:
    """[start, stop) around the hole: at most `pre` approximate tokens before the cursor and
    `suf` after the hole, within the window [lo, hi), trimmed to whole lines where the cut
    fell inside one (a prompt that starts mid-line reads as broken code)."""
    before = [m.start() for m in _PIECE.finditer(text, lo, offset)]
    start = lo if len(before) <= pre else before[len(before) - pre] if pre else offset
    if start > lo:
        line = text.find("\n", start, offset)
        start = line + 1 if line >= 0 else start
    ends = [m.end() for m in _PIECE.finditer(text, after, hi)]
    stop = hi if len(ends) <= suf else ends[suf - 1] if suf else after
    if stop < hi:
        line = text.rfind("\n", after, stop)
        stop = line + 1 if line >= 0 else stop
    return start, stop


class FimEngineClient:
    """One `openai+` engineAddress: `connect` once (retrying with backoff while the API does not
    answer), then one streamed completion per hole."""

    remote = None  # no engine-service link (backend.remote)

    def __init__(self, port: Port, options: EngineOptions, backoff_s: tuple[float, float]) -> None:
        assert options.address is not None
        self.port, self.options, self.ledger = port, options, port.ledger
        self.address = parse_fim_address(options.address)
        self.route = self.address.route
        self.model = options.api_model
        self.backoff_s = backoff_s  # reconnecting at start-up: first and longest delay
        self.key = api_key(options)
        self.paused_until = 0.0  # time.monotonic(): no request before (429, 5xx, deadline)
        self.pauses = Backoff(*BACKOFF_S)  # its failures: 5xx answers and deadlines in a row
        self.troubled = False  # the user was told of the current trouble
        self.closed = False
        self.http: httpx.AsyncClient | None = None
        self._retry = Retry(self._rehello, lambda: Backoff(*self.backoff_s), lambda: self.closed)

    def _client(self) -> httpx.AsyncClient:
        if self.http is None:
            headers = {"Accept-Encoding": "identity"}  # a compressed body's size is not its own
            if self.key:
                headers["Authorization"] = f"Bearer {self.key}"
            self.http = httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(DEADLINE_S, connect=CONNECT_TIMEOUT_S),  # _until_done's
                trust_env=False,  # a corporate HTTP_PROXY would swallow a loopback server
            )
        return self.http

    # -- connecting -------------------------------------------------------------------------------
    async def connect(self, report: Callable[[str], None]) -> None:
        """The first attempt, and how the load ends (reported); never raises."""
        report(f"connecting to the completion API at {self.address.base}")
        if await self._hello() is None:
            self._retry.start()

    @property
    def retrying(self) -> bool:
        """Whether it is waiting for the API to answer (after a first try that got none)."""
        return self._retry.running

    async def _hello(self) -> bool | None:
        """`GET {base}/models`: True when ready, False when refused for good, None to retry."""
        port, base = self.port, self.address.base
        try:
            status, listed = await asyncio.wait_for(self._models(), DEADLINE_S)
        except (httpx.HTTPError, asyncio.TimeoutError) as e:
            port.failed(f"completion API {base} is unreachable ({_why(e)}); retrying meanwhile")
            return None
        if status in (401, 403):
            port.failed(self._refused(status))
            return False
        if status == 429 or status >= 500:
            port.failed(f"completion API {base} answered HTTP {status}; retrying")
            return None
        if self.model is None:
            self.model = listed
        if self.model is None:
            port.failed(
                f"completion API {base} lists no model (GET /models: HTTP {status}); "
                "set engineModel to the model to ask for"
            )
            return False
        port.ready(f"completion API {base} ready: model {self.model}")
        return True

    async def _models(self) -> tuple[int, str | None]:
        """GET /models: its status, and the first model it lists (bounded, as every answer)."""
        async with self._client().stream("GET", f"{self.address.base}/models") as reply:
            if reply.status_code != 200:
                return reply.status_code, None
            try:
                return 200, _first_model(await parse_json(await read_body(reply)))
            except BadAnswer:
                return 200, None

    async def _rehello(self) -> bool:
        return await self._hello() is not None

    def _refused(self, status: int) -> str:
        hint = "check" if self.key else "no key is set: set"
        return (
            f"completion API {self.address.base} refused the key (HTTP {status}); {hint} the "
            f"engineToken setting or ${self.options.key_env}"
        )

    def close(self) -> None:
        """Stop retrying; requests in flight end with the client."""
        self.closed = True
        self._retry.stop()
        http, self.http = self.http, None
        if http is not None:
            try:
                closing = asyncio.get_running_loop().create_task(http.aclose())
            except RuntimeError:  # no loop any more: the sockets close with the process
                return
            closing.add_done_callback(lambda t: t.cancelled() or t.exception())

    @property
    def positions(self) -> int | None:
        return None  # the API's model is not ours to clamp settings to

    def status(self) -> dict[str, Any]:
        return {
            "engine_address": self.options.address,
            "service_model": self.model,
            "api_route": self.route,
            "paused_s": round(max(0.0, self.paused_until - time.monotonic()), 3),
        }

    # -- requests ---------------------------------------------------------------------------------
    async def fill(self, hole: Hole) -> Filled:
        """Plan the hole here, send its context with the plan's length, cut the answer where
        the construct ends."""
        if self.closed:
            raise NotReady("the completion API client is closed")
        if time.monotonic() < self.paused_until:
            raise NotReady(self.port.error or "the completion API asked to wait")
        if hole.cancel.is_set():
            raise Superseded
        p = hole.params
        plan = planner.plan(
            hole.text, hole.offset, hole.language_id, approx_encode, end=hole.end,
            tree=hole.tree, max_positions=CONTEXT_TOKENS, prefix_tokens=hole.prefix_tokens,
            suffix_tokens=hole.suffix_tokens, max_span=p.max_span, block_size=p.block_size,
        )  # fmt: skip
        lo, hi = window(hole.text, hole.offset, hole.after, hole.prefix_tokens,
                        hole.suffix_tokens, hole.language_id, hole.tree)  # fmt: skip
        start, stop = cut_context(hole.text, lo, hole.offset, hole.after, hi,
                                  plan.prefix_tokens, plan.suffix_tokens)  # fmt: skip
        span = p.span if isinstance(p.span, int) else plan.max_span
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": hole.text[start : hole.offset],
            "suffix": hole.text[hole.after : stop],
            "max_tokens": span,
            "stream": True,
            "temperature": p.temperature,
        }
        if p.top_p < 1:
            body["top_p"] = p.top_p
        t0 = time.perf_counter()
        with self.ledger.call(hole.cancel):
            text, finish = await self._until_done(body, plan.stop, hole)
        ms = (time.perf_counter() - t0) * 1000
        result = _result(text, finish, plan.stop, span, ms)
        self.ledger.record(result, ms, kind=plan.kind, route=self.route)
        return Filled([result], plan.kind, plan.span, start, stop)

    async def refine(self, hole: Hole, fraction: float) -> RefineResult:
        raise RemoteError(
            "refining a selection needs a diffusion engine of our own (in-process or "
            "dllm-infill serve); a completion API has no remasking",
            "unsupported",
        )

    async def _until_done(
        self, body: dict[str, Any], stop: StopRule, hole: Hole
    ) -> tuple[str, str | None]:
        """The request, while watching the hole's cancel flag (a newer request took over) and
        its deadline: DEADLINE_S for the whole of it, however the bytes trickle in."""
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._post(body, stop))
        task.add_done_callback(_retrieved)
        deadline = loop.time() + DEADLINE_S
        try:
            while not task.done():
                await asyncio.wait(
                    {task}, timeout=max(0.0, min(CANCEL_POLL_S, deadline - loop.time()))
                )
                if task.done():
                    break
                if hole.cancel.is_set():
                    task.cancel()
                    raise Superseded
                if loop.time() >= deadline:
                    task.cancel()
                    raise self._late()
        except asyncio.CancelledError:
            task.cancel()
            raise
        return task.result()

    async def _post(self, body: dict[str, Any], stop: StopRule) -> tuple[str, str | None]:
        route = self.route or ROUTES[0]
        url = f"{self.address.base}{route}"
        try:
            async with self._client().stream("POST", url, json=body) as response:
                if response.status_code == 404 and self.route is None and route == ROUTES[0]:
                    self.route = ROUTES[1]  # no FIM route: OpenAI's completions with a suffix
                    log.info("%s answered 404: using %s", url, ROUTES[1])
                    return await self._post(body, stop)
                if response.status_code != 200:
                    raise await self._failed(response)
                if self.route is None:
                    self.route = route
                answer = await _read(response, stop)
        except httpx.TimeoutException:
            raise self._late() from None
        except httpx.HTTPError as e:
            raise self._trouble(f"{url} is unreachable ({_why(e)})", pause=0.0) from None
        except BadAnswer as e:
            raise RemoteError(f"{url}: {e}", e.code) from None
        self._recovered()
        return answer

    # -- how a failed call is taken ---------------------------------------------------------------
    async def _failed(self, response: httpx.Response) -> Exception:
        status, url = response.status_code, str(response.request.url)
        if status in (401, 403):
            refused = self._refused(status)
            self.port.failed(refused, tell=True)
            return NotReady(refused)
        if status == 429:
            pause = self.pauses.after(response.headers.get("retry-after"))
            return self._trouble(f"{url} is rate limiting (HTTP 429)", pause)
        message = await _message(response)
        if status >= 500:
            return self._trouble(f"{url} answered HTTP {status}: {message}", self.pauses.next())
        return RemoteError(f"{url} answered HTTP {status}: {message}", f"http_{status}")

    def _late(self) -> NotReady:
        url = f"{self.address.base}{self.route or ROUTES[0]}"
        return self._trouble(f"no answer from {url} within {DEADLINE_S:g} s", self.pauses.next())

    def _trouble(self, what: str, pause: float) -> NotReady:
        """A call that may work later: no request for `pause` seconds; the user told once."""
        self.paused_until = time.monotonic() + pause
        error = what + (f"; retrying in {pause:g} s" if pause else "")
        self.port.troubled(error, tell=not self.troubled)  # told once per episode
        if self.troubled:
            log.info("%s", error)
        self.troubled = True
        return NotReady(error)

    def _recovered(self) -> None:
        if self.troubled:
            self.port.ready(f"completion API {self.address.base} answers again; completions resume")
        self.pauses.reset()
        self.troubled = False


async def _read(response: httpx.Response, stop: StopRule) -> tuple[str, str | None]:
    """The completion's text and finish reason, from a stream of server-sent events or one JSON
    body; a stream is left as soon as the stop rule sees the construct end. `stop.cut` reads
    the whole text: it runs each time the text has grown by a quarter, so that a stream of
    one-character pieces costs O(n log n), not O(n²)."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        text, finish = _choice(await parse_json(await read_body(response)))
        return check_text(text), finish
    text, finish, checked = "", None, 0
    async with aclosing(read_lines(response)) as lines:
        async for line in lines:
            if not line.startswith(b"data:"):
                continue  # comments, event names, keep-alives
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            piece, reason = _choice(await parse_json(payload))
            text, finish = check_text(text + piece), reason or finish
            if len(text) >= checked + max(1, checked // 4):
                checked = len(text)
                if stop.cut(text) is not None:
                    return text, "construct"  # the rest is not needed: closing the stream drops it
                await asyncio.sleep(0)  # a cut of 64 Ki characters takes ~20 ms: one at a time
    return text, finish


def _choice(data: Any) -> tuple[str, str | None]:
    try:
        choice = data["choices"][0] if data["choices"] else {}
        text, finish = choice.get("text") or "", choice.get("finish_reason")
    except (TypeError, KeyError, IndexError, AttributeError):
        raise BadAnswer("the completion API's answer has no choices[0].text") from None
    if not isinstance(text, str):
        raise BadAnswer("the completion API's choices[0].text is not a string")
    return text, finish if isinstance(finish, str) else None


def _result(text: str, finish: str | None, stop: StopRule, span: int, ms: float) -> InfillResult:
    cut = stop.cut(text)
    reason: StopReason
    if cut is not None:
        text, reason = text[:cut], "syntax"
    else:
        reason = "span_full" if finish == "length" else "end_token"
    text = stop.close(text)
    return InfillResult(text, len(approx_encode(text)), 0, 0, ms, reason, span=span)


def _first_model(data: Any) -> str | None:
    """The first model GET /models lists: a name that is plain text (it is shown and sent)."""
    try:
        model = data["data"][0]["id"]
    except (LookupError, TypeError):
        return None
    return model if isinstance(model, str) and model and shown(model) == model else None


async def _message(response: httpx.Response) -> str:
    """The API's own error message (OpenAI's `{"error": {"message"}}`), `shown`."""
    try:
        data = await parse_json(await read_body(response))
        err = data.get("error") if isinstance(data, dict) else None
        message = err.get("message") if isinstance(err, dict) else err
    except BadAnswer:
        message = None
    return shown(message or response.reason_phrase or "no message")


def _why(e: BaseException) -> str:
    return shown(str(e) or type(e).__name__)


def _retrieved(task: asyncio.Task[Any]) -> None:
    """A request left behind (deadline, superseded) ends unobserved: its outcome is taken."""
    if not task.cancelled():
        task.exception()
