"""A hosted next-edit API as a source of next edits: Inception's Mercury Edit
(`nextEdits.hostedAddress: "mercury+https://api.inceptionlabs.ai/v1"`), the "hosted" tier
beside structure (infill_engine/edits/structure.py) and the dLLM's rewrite.

The address is the API's base URL behind `mercury+` (`parse_edit_address`); a request goes to
`{base}/edit/completions`, or to the address itself where it already ends so. The request is
OpenAI's chat-completions shape, not streamed (the route streams nothing):
`{"model", "messages": [{"role": "user", "content": PROMPT}], "max_tokens", "temperature"}`
with `Authorization: Bearer KEY`; the prompt's tagged sections are edit_prompt.py's. The model
is `mercury-edit-2` unless told otherwise. The answer is `choices[0].message.content`: the
editable region rewritten. It is diffed against the region to one minimal replacement, a
`Suggestion` of kind "hosted" with the fixed score SCORE (the API gives no confidence); a
rewrite equal to the region is no suggestion.

The key: the one given (a setting), else the environment variable named (`DLLM_API_KEY`, the
engine's too: one Inception key serves both). It is never logged, shown or put in `status()`.

The answer is hostile input (untrusted.py's rules, with a tighter cap): at most
MAX_ANSWER_BYTES of it is read, all within one deadline of DEADLINE_S, and JSON of bounded cost
is parsed; an answer too large, not JSON, of the wrong shape, or whose rewrite deletes most of
the region or grows it many times, gives no suggestion and one log line; a suggestion that
holds what looks like a credential (infill_engine/finish/secrets.py) is dropped and counted.

Failures, none of which raises out of `suggest` (it answers `[]`):
- 401 / 403: the key is refused: one message (`tell`), and no request again from this
  object; the server makes a new one when the settings change;
- 429: no request until its `Retry-After` (bounded, untrusted.retry_after_s) has passed, else
  the backoff's pause;
- no whole answer within DEADLINE_S, no connection, a 5xx, another 4xx (a model name the
  account lacks, billing): no request for a backoff that doubles (BACKOFF_S), cleared by the
  next success.
The user is told once per episode of trouble (`tell`); every failure is logged, `shown`, with
what looks like a key in the API's message redacted (some APIs echo part of a refused key).

Not confirmed from Inception's documentation, and written so that either form works: whether
the answer always comes inside ``` fences (the guide says so; the reference example has none);
whether the sections' order matters (the reference example puts the history first and the
region after the file; the guide's walk-through and the SDK example use the order here); what
`max_tokens` the route accepts beyond its documented 1..8192.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from infill_engine.edits.history import Edit
from infill_engine.edits.suggestion import MAX_TEXT_CHARS, Suggestion
from infill_engine.finish import secrets

from ..options import EDIT_PREFIX, normalize_fim_address
from . import edit_prompt
from .backoff import Backoff
from .untrusted import BadAnswer, parse_json, read_body, redact, shown

log = logging.getLogger("dllm-infill-ls.next-edits")  # under guard_logs' secret filter

ROUTE = "/edit/completions"
DEFAULT_MODEL = "mercury-edit-2"
DEFAULT_KEY_ENV = "DLLM_API_KEY"
SCORE = 0.8  # every hosted suggestion's: above the gate's "hosted" threshold (0.5)
DEADLINE_S = 2.0  # a whole request; a next edit shown later than this is no longer "next"
CONNECT_TIMEOUT_S = 1.0
MAX_ANSWER_BYTES = 64 << 10  # 16x the largest rewrite a suggestion may carry
MAX_TOKENS = 1024  # the route's default; a region is at most ~600 tokens
BACKOFF_S = (1.0, 60.0)  # first and longest pause after a failure


@dataclass(frozen=True)
class EditAddress:
    base: str  # the API's base URL, e.g. https://api.inceptionlabs.ai/v1
    url: str  # where requests go: {base}/edit/completions


def parse_edit_address(address: str) -> EditAddress:
    """`mercury+https://HOST[:PORT]/PATH` (or `mercury+http://`): the API's base URL, or its
    edit route itself; ValueError otherwise (options.normalize_fim_address's checks: a key in
    the URL is refused without echoing it)."""
    if not isinstance(address, str) or not address.startswith(EDIT_PREFIX):
        raise ValueError(f"must be {EDIT_PREFIX}https://HOST[:PORT]/PATH")
    url = normalize_fim_address(address, EDIT_PREFIX)[len(EDIT_PREFIX) :]
    if url.endswith(ROUTE):
        return EditAddress(url[: -len(ROUTE)], url)
    return EditAddress(url, url + ROUTE)


def edit_key(
    token: str | None, key_env: str = DEFAULT_KEY_ENV, env: Mapping[str, str] | None = None
) -> str | None:
    """The key setting, else the variable `key_env` names, else none."""
    if token:
        return token
    return (os.environ if env is None else env).get(key_env) or None


class HostedEdits:
    """One `mercury+` address: `suggest` asks it for the next edit at a cursor."""

    def __init__(
        self,
        address: str,
        key: str | None,
        *,
        model: str = DEFAULT_MODEL,
        tell: Callable[[str], None] | None = None,
        deadline_s: float = DEADLINE_S,
        key_source: str = f"${DEFAULT_KEY_ENV}",
    ) -> None:
        self.address = parse_edit_address(address)
        self.key, self.model = key, model
        self.tell = tell or (lambda _: None)  # a message to the user (window/showMessage)
        self.deadline_s = deadline_s
        self.key_source = key_source  # where a key is set, for the message when it is refused
        self.refused: str | None = None  # the key was refused: why; no request from now on
        self.error: str | None = None  # the trouble now, if any
        self.paused_until = 0.0  # time.monotonic(): no request before
        self.pauses = Backoff(*BACKOFF_S)
        self.http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self.http is None:
            headers = {"Accept-Encoding": "identity"}  # a compressed body's size is not its own
            if self.key:
                headers["Authorization"] = f"Bearer {self.key}"
            self.http = httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(self.deadline_s, connect=CONNECT_TIMEOUT_S),
                trust_env=False,  # a corporate HTTP_PROXY would swallow a loopback server
            )
        return self.http

    async def aclose(self) -> None:
        http, self.http = self.http, None
        if http is not None:
            await http.aclose()

    def close(self) -> None:
        """`aclose` from synchronous code (a settings change): on the running loop, if any;
        without one the sockets close with the process."""
        try:
            closing = asyncio.get_running_loop().create_task(self.aclose())
        except RuntimeError:
            return
        closing.add_done_callback(lambda t: t.cancelled() or t.exception())

    def status(self) -> dict[str, Any]:
        return {
            "hosted_edits": self.address.url,
            "hosted_model": self.model,
            "hosted_error": self.refused or self.error,
            "hosted_paused_s": round(max(0.0, self.paused_until - time.monotonic()), 3),
        }

    # -- asking -----------------------------------------------------------------------------------
    async def suggest(
        self,
        uri: str,
        language_id: str,
        text: str,
        cursor: int,
        edits: Sequence[Edit],
        viewed: Sequence[tuple[str, str]] = (),
    ) -> list[Suggestion]:
        """The API's next edit at `cursor` (a str offset into `text`), as at most one
        suggestion; [] when it has none, is not to be asked now, or fails. `edits`: the
        document's History.edits(), oldest first; `viewed`: (uri, excerpt) of other files the
        user looked at lately, oldest first. `language_id` is not sent (the prompt has no field
        for it; the path's extension says as much)."""
        if self.refused is not None or time.monotonic() < self.paused_until:
            return []
        # on a thread: the credential check reads every line sent, ~3 ms a KiB on a 2-core CPU,
        # in short calls, between which the loop runs
        built = await asyncio.to_thread(_build, uri, text, cursor, list(edits), list(viewed))
        if built is None:
            return []
        region, message = built
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": message}],
            "max_tokens": MAX_TOKENS,
            "temperature": 0.0,
        }
        content = await self._ask(body)
        if content is None:
            return []
        return _suggestions(content, text, region)

    async def _ask(self, body: dict[str, Any]) -> str | None:
        """The answer's content, or None (each failure taken as the module docstring says)."""
        url = self.address.url
        try:
            content = await asyncio.wait_for(self._post(body), self.deadline_s)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            self._trouble(f"no answer from {url} within {self.deadline_s:g} s", self.pauses.next())
            return None
        except httpx.HTTPError as e:
            why = shown(str(e) or type(e).__name__)
            self._trouble(f"{url} is unreachable ({why})", self.pauses.next())
            return None
        except BadAnswer as e:
            log.info("next edits: %s: %s; no suggestion", url, e)
            return None
        except _Failed as e:
            self._failed(e.status, e.message, e.retry_after)
            return None
        self._recovered()
        return content

    async def _post(self, body: dict[str, Any]) -> str:
        async with self._client().stream("POST", self.address.url, json=body) as reply:
            if reply.status_code != 200:
                raise _Failed(
                    reply.status_code,
                    await _message(reply, self.key),
                    reply.headers.get("retry-after"),
                )
            return _content(await parse_json(await read_body(reply, MAX_ANSWER_BYTES)))

    # -- how a failed call is taken ---------------------------------------------------------------
    def _failed(self, status: int, message: str, retry_after: str | None) -> None:
        url = self.address.url
        if status in (401, 403):
            if self.refused is not None:
                return  # a request that was in flight beside the first refusal
            hint = "check" if self.key else "no key is set: set"
            self.refused = (
                f"next-edit API {self.address.base} refused the key (HTTP {status}); {hint} "
                f"{self.key_source}; no next edits from it until the settings change"
            )
            log.warning("%s", self.refused)
            self.tell(self.refused)
            return
        if status == 429:
            pause = self.pauses.after(retry_after)
            self._trouble(f"{url} is rate limiting (HTTP 429)", pause)
            return
        self._trouble(f"{url} answered HTTP {status}: {message}", self.pauses.next())

    def _trouble(self, what: str, pause: float) -> None:
        """A call that may work later: no request for `pause` seconds; the user told once."""
        self.paused_until = time.monotonic() + pause
        error = f"next edits: {what}; asking again in {pause:g} s"
        log.warning("%s", error)
        if self.error is None:
            self.tell(error)
        self.error = error

    def _recovered(self) -> None:
        if self.error is not None:
            log.info("next edits: %s answers again", self.address.url)
        self.error = None
        self.pauses.reset()


class _Failed(Exception):
    """An answer other than 200: its status, its message (`shown`) and its Retry-After."""

    def __init__(self, status: int, message: str, retry_after: str | None) -> None:
        super().__init__(status)
        self.status, self.message, self.retry_after = status, message, retry_after


def _build(
    uri: str, text: str, cursor: int, edits: list[Edit], viewed: list[tuple[str, str]]
) -> tuple[edit_prompt.Region, str] | None:
    """The editable region and the prompt, or None when there is nothing to send."""
    region = edit_prompt.region(text, cursor)
    if region is None:
        log.info("next edits: the cursor's line is longer than %d characters; not sent",
                 edit_prompt.MAX_REGION_CHARS)  # fmt: skip
        return None
    message = edit_prompt.prompt(uri, text, region, edits, viewed)
    if message is None:
        log.info("next edits: the region holds what looks like a credential; not sent")
        return None
    return region, message


def _suggestions(content: str, text: str, region: edit_prompt.Region) -> list[Suggestion]:
    """The answer's rewrite of the region as at most one suggestion (offsets into `text`)."""
    code = text[region.start : region.end]
    new = edit_prompt.rewrite(content, code)
    found = edit_prompt.replacement(code, new)
    if found is None:
        if new != code:
            log.info(
                "next edits: a rewrite of %d characters for a region of %d is not an edit; "
                "no suggestion", len(new), len(code),
            )  # fmt: skip
        return []
    a, b, replaced = found
    if len(replaced) > MAX_TEXT_CHARS:
        log.info("next edits: a suggestion of %d characters is too long", len(replaced))
        return []
    if secrets.held_back(replaced):
        log.info("next edits: the suggestion holds what looks like a credential; dropped")
        return []
    return [Suggestion(region.start + a, region.start + b, replaced, "hosted", SCORE)]


def _content(data: Any) -> str:
    """choices[0].message.content, a string."""
    try:
        content = data["choices"][0]["message"]["content"]
    except (TypeError, KeyError, IndexError):
        raise BadAnswer("the answer has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise BadAnswer("the answer's choices[0].message.content is not a string")
    return content


async def _message(reply: httpx.Response, key: str | None) -> str:
    """The API's own error message (`{"error": {"message"}}`), `shown`, with what looks like a
    key in it (and the key itself) redacted first."""
    try:
        data = await parse_json(await read_body(reply, MAX_ANSWER_BYTES))
        err = data.get("error") if isinstance(data, dict) else None
        message = err.get("message") if isinstance(err, dict) else err
    except BadAnswer:
        message = None
    text = redact(str(message or reply.reason_phrase or "no message"))
    return shown(text.replace(key, "***") if key else text)
