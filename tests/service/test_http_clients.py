"""The HTTP front driven by a client no one here wrote: the `openai` package against
`/v1/completions` with a `suffix` (fill in the middle), plain and streamed, with several choices,
stop strings, a wrong token and a bad request. With `raw` the fills must be exactly what the
engine writes in-process for the same hole through the native path (greedy decoding is
deterministic, and a row decodes the same in any batch), cut at the stop strings; by default
they are what an editor would show (decide.py), which the native reply's `shown` says."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import builtin_engine
import httpx
import openai
import pytest

from infill_engine import Engine, InfillParams, InfillResult
from infill_engine.hole import Prepared, prepare
from infill_engine.scheduler import Scheduler
from infill_engine.service import Service, ServiceThread, parse_address
from infill_engine.service.native import parse_native

TOKEN = "clients-token"
# A hole whose two greedy candidates end differently with the builtin model: one at an end
# token, one by filling its whole span (checked below, so a retrained model that changes this
# fails loudly here rather than leaving a finish reason untested).
DOC = "import os\n\n\ndef read(path):\n    with open(path) as f:\n        \n"
CURSOR = DOC.index("as f:\n        ") + len("as f:\n        ")
MAX_TOKENS = 4  # short enough that one of the two spans runs full and the other ends early


engine = builtin_engine.engine  # the module's engine fixture (builtin_engine.py)


@pytest.fixture(scope="module")
def base_url(engine: Engine) -> Iterator[str]:
    service = Service(engine, "builtin", TOKEN, scheduler=Scheduler(engine.live_batch, max_batch=8))
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        yield f"http://127.0.0.1:{http.bound.port}/v1"


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(api_key=TOKEN, base_url=base_url, max_retries=0, timeout=120) as c:
        yield c


@dataclass(frozen=True)
class Reference:
    """The engine's own fills of the hole, in-process, and what the OpenAI route should make of
    them with `stop`: the texts cut at the first stop string, and their finish reasons."""

    prepared: Prepared
    results: list[InfillResult]

    def texts(self, stop: list[str]) -> list[str]:
        return [_cut(r.text, stop) for r in self.results]

    def finish_reasons(self, stop: list[str]) -> list[str]:
        cut = [any(s in r.text for s in stop) for r in self.results]
        return [
            "length" if r.stop_reason == "span_full" and not hit else "stop"
            for r, hit in zip(self.results, cut, strict=True)
        ]

    @property
    def prompt_tokens(self) -> int:
        return len(self.prepared.context.prefix_ids) + len(self.prepared.context.suffix_ids)


@pytest.fixture(scope="module")
def reference(engine: Engine) -> Reference:
    """What /v1/completions asks of the engine (greedy, at most MAX_TOKENS, two candidates, no
    end token at the first position), asked through the native path on this thread."""
    ask = parse_native({"text": DOC, "offset": CURSOR, "languageId": "python", "candidates": 2,
                        "params": {"max_span": MAX_TOKENS, "min_tokens": 1}})  # fmt: skip
    prepared = prepare(engine, ask)
    results = engine.infill_batch(prepared.requests)
    full = [r.stop_reason == "span_full" for r in results]
    assert sorted(full) == [False, True], f"the hole no longer tests both: {results}"
    return Reference(prepared, results)


def _cut(text: str, stop: list[str]) -> str:
    hits = [text.find(s) for s in stop if s in text]
    return text[: min(hits)] if hits else text


def complete(client: openai.OpenAI, **kwargs: Any) -> Any:
    return client.completions.create(
        model="builtin",
        prompt=DOC[:CURSOR],
        suffix=DOC[CURSOR:],
        max_tokens=MAX_TOKENS,
        n=2,
        temperature=0,
        extra_body={"languageId": "python", "raw": True},
        **kwargs,
    )


def span_full_stop(reference: Reference) -> str:
    """A stop string inside the fill that ran to its span's end, not at its start: hitting it
    turns that choice's finish reason from "length" into "stop"."""
    full = next(r.text for r in reference.results if r.stop_reason == "span_full")
    stop = full[len(full) // 2 : len(full) // 2 + 3]
    assert stop.strip() and full.index(stop) > 0, full
    return stop


# -- plain --------------------------------------------------------------------------------------
def test_the_fill_is_the_engines_own_and_a_full_span_finishes_by_length(
    client: openai.OpenAI, reference: Reference
) -> None:
    r = complete(client)
    assert r.object == "text_completion" and [c.index for c in r.choices] == [0, 1]
    assert [c.text for c in r.choices] == reference.texts([])
    assert all(c.text for c in r.choices), "the fills are not empty"
    assert [c.finish_reason for c in r.choices] == reference.finish_reasons([])
    assert sorted(c.finish_reason for c in r.choices) == ["length", "stop"]
    assert r.usage is not None
    assert r.usage.prompt_tokens == reference.prompt_tokens > 0
    assert r.usage.completion_tokens == sum(x.tokens for x in reference.results) > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_a_stop_string_cuts_the_fill_and_finishes_it_by_stop(
    client: openai.OpenAI, reference: Reference
) -> None:
    stop = [span_full_stop(reference), "\n\n\n"]
    r = complete(client, stop=stop)
    texts = [c.text for c in r.choices]
    assert texts == reference.texts(stop)
    assert all(stop[0] not in t for t in texts)
    for c, x in zip(r.choices, reference.results, strict=True):
        if x.stop_reason == "span_full":
            assert 0 < len(c.text) < len(x.text)  # cut inside the fill
    assert [c.finish_reason for c in r.choices] == ["stop", "stop"]


def test_one_choice_and_a_single_prompt_list(client: openai.OpenAI, reference: Reference) -> None:
    r = client.completions.create(
        model="builtin",
        prompt=[DOC[:CURSOR]],
        suffix=DOC[CURSOR:],
        max_tokens=MAX_TOKENS,
        extra_body={"languageId": "python", "raw": True},
    )
    assert len(r.choices) == 1
    assert r.choices[0].text == reference.texts([])[0]  # the planned span is the first candidate


def test_by_default_the_choices_are_what_an_editor_would_show(
    client: openai.OpenAI, base_url: str, reference: Reference
) -> None:
    """Not the model's raw text: the native reply's `shown` for the same hole (one decision,
    decide.py), "" past its last; the same streamed, in one piece."""
    native = httpx.post(
        base_url.removesuffix("/v1") + "/v2/infill",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json={"text": DOC, "offset": CURSOR, "languageId": "python", "candidates": 2,
              "trigger": "invoked", "params": {"max_span": MAX_TOKENS, "min_tokens": 1}},
        timeout=120,
    ).json()  # fmt: skip
    want = ([x["text"] for x in native["shown"]][:2] or [""]) * 2
    want = want[:2]
    assert [i["text"] for i in native["items"]] == [r.text for r in reference.results]
    args = {"model": "builtin", "prompt": DOC[:CURSOR], "suffix": DOC[CURSOR:],
            "max_tokens": MAX_TOKENS, "n": 2, "extra_body": {"languageId": "python"}}  # fmt: skip
    r = client.completions.create(**args)
    assert [c.text for c in r.choices] == want
    assert want != reference.texts([]), "the hole no longer tells shown from raw"
    text = ["", ""]
    with client.completions.create(**args, stream=True) as stream:
        for chunk in stream:
            for c in chunk.choices:
                text[c.index] += c.text
    assert text == want


# -- streamed -----------------------------------------------------------------------------------
def test_streaming_sends_the_same_fills_and_finish_reasons(
    client: openai.OpenAI, reference: Reference
) -> None:
    stop = [span_full_stop(reference)]
    for want_stop in ([], stop):
        text: dict[int, str] = {0: "", 1: ""}
        finish: dict[int, list[str]] = {0: [], 1: []}
        chunks = 0
        with complete(client, stream=True, stop=want_stop or None) as stream:
            for chunk in stream:
                chunks += 1
                assert chunk.object == "text_completion"
                for c in chunk.choices:
                    text[c.index] += c.text
                    if c.finish_reason is not None:
                        finish[c.index].append(c.finish_reason)
        assert chunks >= 2  # one event per choice with its text, then the finishing events
        assert [text[0], text[1]] == reference.texts(want_stop)
        expected = reference.finish_reasons(want_stop)
        assert [finish[0], finish[1]] == [[expected[0]], [expected[1]]]  # each finishes once


def test_streamed_calls_at_once_from_the_async_client(base_url: str, reference: Reference) -> None:
    """Four streamed calls in flight together share the running batch and still get the
    engine's own fills."""

    async def one(c: openai.AsyncOpenAI) -> list[str]:
        text = ["", ""]
        stream = await c.completions.create(
            model="builtin", prompt=DOC[:CURSOR], suffix=DOC[CURSOR:], max_tokens=MAX_TOKENS,
            n=2, stream=True, extra_body={"languageId": "python", "raw": True})  # fmt: skip
        async for chunk in stream:
            for choice in chunk.choices:
                text[choice.index] += choice.text
        return text

    async def main() -> list[list[str]]:
        async with openai.AsyncOpenAI(api_key=TOKEN, base_url=base_url, max_retries=0,
                                      timeout=120) as c:  # fmt: skip
            return list(await asyncio.gather(*(one(c) for _ in range(4))))

    assert asyncio.run(main()) == [reference.texts([])] * 4


# -- errors -------------------------------------------------------------------------------------
def test_a_wrong_token_is_an_authentication_error(base_url: str) -> None:
    for key in ("wrong", TOKEN + "x"):
        with openai.OpenAI(api_key=key, base_url=base_url, max_retries=0) as bad:
            with pytest.raises(openai.AuthenticationError) as e:
                bad.completions.create(model="builtin", prompt="x = ", suffix="\n", max_tokens=4)
            assert e.value.status_code == 401 and "bearer token" in e.value.message
            with pytest.raises(openai.AuthenticationError):
                bad.completions.create(model="builtin", prompt="x = ", max_tokens=4, stream=True)
            with pytest.raises(openai.AuthenticationError):
                bad.models.list()


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"n": 9}, "n must be"),
        ({"n": 9, "stream": True}, "n must be"),
        ({"temperature": 5}, "temperature must be"),
        ({"stop": ["x"] * 17}, "stop must be"),
        ({"prompt": [1, 2, 3]}, "prompt must be"),
        ({"echo": True}, "echo is not supported"),
        ({"max_tokens": 5000}, "max_tokens must be"),
    ],
)
def test_a_bad_request_is_a_bad_request_error_that_says_why(
    client: openai.OpenAI, kwargs: dict[str, Any], says: str
) -> None:
    args: dict[str, Any] = {"model": "builtin", "prompt": "x = ", "suffix": "\n", "max_tokens": 4}
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(**{**args, **kwargs})
    assert e.value.status_code == 400 and says in e.value.message


def test_a_full_queue_is_a_503_the_client_retries_and_an_error_event_in_a_stream(
    engine: Engine,
) -> None:
    """One slot, busy with a long fill, and room for one more row in the queue: a call for two
    choices is refused whole. Plain, that is a 503 with Retry-After, which the client retries
    (and then gives up); streamed, the refusal comes as an error event after the 200, which the
    client raises as an APIError."""
    scheduler = Scheduler(engine.live_batch, max_queue=1, max_batch=1)
    service = Service(engine, "builtin", TOKEN, scheduler=scheduler)
    long = InfillParams(span=64, threshold=1.5, min_tokens=64, cache="none")
    # the fill is held inside its model pass until the calls are done, however fast the machine
    release, holding = threading.Event(), threading.Event()

    def hold(*_: Any) -> None:
        holding.set()
        release.wait(60)

    held = engine.model.register_forward_pre_hook(hold)
    try:
        with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
            assert http.bound is not None
            ticket = scheduler.submit_request(engine.request("x = ", "\n", long))
            assert holding.wait(30), "the fill did not start"
            _wait_until(lambda: scheduler.stats()["running"] == 1)
            _refused_twice(f"http://127.0.0.1:{http.bound.port}/v1", scheduler)
            assert scheduler.stats()["running"] == 1  # the long fill went on, untouched
            release.set()
            scheduler.cancel(ticket)
    finally:
        held.remove()
        release.set()


def _refused_twice(url: str, scheduler: Scheduler) -> None:
    with openai.OpenAI(api_key=TOKEN, base_url=url, max_retries=1) as c:
        busy0 = scheduler.stats()["busy"]
        with pytest.raises(openai.InternalServerError) as e:
            c.completions.create(model="builtin", prompt="x = ", suffix="\n", n=2)
        assert e.value.status_code == 503 and e.value.response.headers["retry-after"] == "1"
        assert scheduler.stats()["busy"] == busy0 + 2  # asked twice: the client retried
        with pytest.raises(openai.APIError, match="the queue is full") as streamed:
            for _ in c.completions.create(model="builtin", prompt="x = ", suffix="\n", n=2,
                                          stream=True):  # fmt: skip
                pass
        assert not isinstance(streamed.value, openai.APIStatusError)  # it came after a 200


def _wait_until(cond: Any, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.01)


def test_max_tokens_zero_answers_n_empty_choices(client: openai.OpenAI) -> None:
    """OpenAI's shape: one choice per `n`, each empty and finished by length, so that a client
    reading `choices[0]` does not fail on a call that asked for nothing."""
    args: dict[str, Any] = {"model": "builtin", "prompt": "x = ", "suffix": "\n", "n": 2}
    r = client.completions.create(max_tokens=0, **args)
    assert [(c.index, c.text, c.finish_reason) for c in r.choices] == [
        (0, "", "length"),
        (1, "", "length"),
    ]
    with client.completions.create(max_tokens=0, stream=True, **args) as stream:
        finished = [(c.index, c.finish_reason) for chunk in stream for c in chunk.choices
                    if c.finish_reason is not None]  # fmt: skip
    assert finished == [(0, "length"), (1, "length")]


@pytest.mark.parametrize(("n", "max_tokens"), [(4, 32), (2, 1)])
def test_n_choices_come_back_for_any_n(client: openai.OpenAI, n: int, max_tokens: int) -> None:
    """OpenAI's shape: exactly `n` choices, indexed 0 to n-1. Greedy fills differ by their span
    (the planned one, twice and half of it): three distinct ones at this hole, repeated to fill
    `n`, and one when max_tokens caps every span at 1."""
    r = client.completions.create(model="builtin", prompt="def f(x):\n    return ", suffix="\n",
                                  n=n, max_tokens=max_tokens, extra_body={"raw": True})  # fmt: skip
    assert [c.index for c in r.choices] == list(range(n))
    distinct = {c.text for c in r.choices}
    assert all(c.text for c in r.choices)
    assert len(distinct) == (1 if max_tokens == 1 else 3), [c.text for c in r.choices]


# -- llama.vscode's requests, as its source builds them ------------------------------------------
# llama.vscode (VS Code) is not driven here; these are the bodies its llama-server.ts sends to
# `{endpoint}/infill` (createRequestPayload), and the fields of the reply it reads.
def vscode_fim(prefix: str, suffix: str, prompt: str, n_indent: int) -> dict[str, Any]:
    return {"id_slot": 0, "input_prefix": prefix, "input_suffix": suffix, "input_extra": [],
            "prompt": prompt, "n_predict": 128, "n_cmpl": 3, "top_k": 40, "top_p": 0.99,
            "stream": False, "samplers": ["top_k", "top_p", "infill"], "cache_prompt": True,
            "n_indent": n_indent, "t_max_prompt_ms": 500, "t_max_predict_ms": 2500}  # fmt: skip


def test_llama_vscode_fim_and_warm_up_bodies_are_answered(base_url: str) -> None:
    head, line = DOC[:CURSOR].rsplit("\n", 1)
    url = base_url.removesuffix("/v1")
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        assert c.get("/health").json()["status"] == "ok"  # its health check
        r = c.post("/infill", json=vscode_fim(head + "\n", DOC[CURSOR:] + "\n", line, 8))
        assert r.status_code == 200, r.text
        replies = r.json()  # n_cmpl 3: a list, as llama.cpp's, one reply per distinct fill
        assert isinstance(replies, list) and 1 <= len(replies) <= 3
        assert [b["index"] for b in replies] == list(range(len(replies)))
        assert len({b["content"] for b in replies}) == len(replies)  # no fill twice
        body = replies[0]
        assert body["content"]
        for key in ("prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms",
                    "predicted_per_second"):  # fmt: skip
            assert isinstance(body["timings"][key], int | float), key
        assert body["timings"]["predicted_n"] >= 1
        assert "tokens_cached" in body and body["truncated"] is False
        warm = {"id_slot": 0, "input_prefix": "", "input_suffix": "", "prompt": "",
                "input_extra": [{"text": "x = 1\n", "filename": "a.py"}], "n_predict": 0,
                "samplers": [], "cache_prompt": True, "t_max_prompt_ms": 500,
                "t_max_predict_ms": 1}  # fmt: skip
        assert c.post("/infill", json=warm).json()["content"] == ""


def test_the_infill_reply_carries_generation_settings_for_llama_vscode(base_url: str) -> None:
    """llama.vscode's status bar reads `data.generation_settings.n_ctx` (statusbar.ts, with
    show_info on, its default) without a guard: when the reply has no generation_settings the
    read throws, in the callback that would also cache the next suggestion and gather extra
    context, so both are skipped after every fill. llama.cpp sends the object."""
    head, line = DOC[:CURSOR].rsplit("\n", 1)
    url = base_url.removesuffix("/v1")
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        [body, *_] = c.post("/infill", json=vscode_fim(head + "\n", DOC[CURSOR:], line, 4)).json()
    assert isinstance(body["generation_settings"], dict)
    assert isinstance(body["generation_settings"]["n_ctx"], int)


def test_the_model_list_names_the_served_model(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["builtin"]
