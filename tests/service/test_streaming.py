"""Streamed fills arrive as their blocks finish: the scheduler hands a watched row's committed
leading text to its ticket's `progress` listener after each block, and the HTTP front's streamed
`/infill` and `/v1/completions` send each new piece as an event. The pieces of a fill join to
what the plain call answers, stop strings and `n_indent` included. That is the model's own text
(`raw`); what an editor would show (the default) is known once the fills are, and streams in one
piece at the end. Real engine (the builtin
model), real scheduler, the real HTTP front on a loopback port."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import builtin_engine
import httpx
import pytest

from infill_engine import Engine, InfillParams
from infill_engine.scheduler import Scheduler
from infill_engine.service import Service, ServiceThread, parse_address
from infill_engine.service.compat import streamable

TOKEN = "stream-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# a function body: the planner gives it a span of several 32-token blocks, and no line of the
# document drafts it (a draft could take the first fill's place, which then is not streamed)
DOC = "def main():\n    \n"
CURSOR = DOC.index("main():\n    ") + len("main():\n    ")
LLAMA = {"input_prefix": DOC[:CURSOR], "input_suffix": DOC[CURSOR:], "n_predict": 128,
         "languageId": "python", "raw": True}  # fmt: skip
OPENAI = {"prompt": DOC[:CURSOR], "suffix": DOC[CURSOR:], "max_tokens": 128,
          "languageId": "python", "raw": True}  # fmt: skip


engine = builtin_engine.engine  # the module's engine fixture (builtin_engine.py)


@pytest.fixture(scope="module")
def client(engine: Engine) -> Iterator[httpx.Client]:
    service = Service(
        engine,
        "builtin",
        TOKEN,
        body_timeout_s=5.0,
        scheduler=Scheduler(engine.live_batch, max_batch=8),
    )
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        with httpx.Client(base_url=f"http://127.0.0.1:{http.bound.port}", timeout=60) as c:
            yield c


def events(client: httpx.Client, route: str, body: dict[str, Any]) -> list[Any]:
    with client.stream("POST", route, headers=AUTH, json={**body, "stream": True}) as s:
        assert s.status_code == 200
        data = [line[6:] for line in s.iter_lines() if line.startswith("data: ")]
    return [e if e == "[DONE]" else json.loads(e) for e in data]


# -- the scheduler's progress hook ----------------------------------------------------------------
def test_a_watched_ticket_hears_its_leading_text_grow_block_by_block(engine: Engine) -> None:
    """96 tokens in blocks of 16: the listener hears the committed head after blocks finish,
    each text the head of the next and of the result's."""
    scheduler = Scheduler(engine.live_batch)
    try:
        params = InfillParams(span=96, max_span=96, block_size=16, min_tokens=96)
        heard: list[str] = []
        request = engine.request("def main():\n    x = [", "]\n", params)
        result = scheduler.submit_request(request, progress=heard.append).result(60)
        assert result.stop_reason == "span_full" and len(heard) >= 2, heard
        for before, after in zip(heard, [*heard[1:], result.text], strict=True):
            assert len(after) > len(before) and after.startswith(before)
    finally:
        scheduler.close()


def test_an_unwatched_ticket_costs_no_decoding_and_a_failing_listener_costs_nothing(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a listener nothing is decoded but the result; a listener that raises is logged
    and its row decodes on to the same result."""
    decoded = []
    real = engine.rows.decode  # the rows' decoding: results and heads

    def counting(ids: Any) -> str:
        decoded.append(threading.current_thread().name)
        return real(ids)

    monkeypatch.setattr(engine.rows, "decode", counting)
    scheduler = Scheduler(engine.live_batch)
    try:
        params = InfillParams(span=64, max_span=64, block_size=16, min_tokens=64)
        plain = scheduler.submit_request(engine.request("x = [", "]\n", params)).result(60)
        assert len(decoded) == 1  # the result's text alone

        def fails(text: str) -> None:
            raise RuntimeError("a listener's own bug")

        ticket = scheduler.submit_request(engine.request("x = [", "]\n", params), progress=fails)
        assert ticket.result(60).text == plain.text and len(decoded) > 2
    finally:
        scheduler.close()


# -- what may be streamed before the fill is done -------------------------------------------------
def test_streamable_holds_back_what_a_stop_string_or_n_indent_could_still_cut() -> None:
    assert streamable("a = 1\nb", ("\n\n",), 0) == "a = 1\nb"
    assert streamable("a = 1\n", ("\n\n",), 0) == "a = 1"  # "\n" may begin "\n\n"
    assert streamable("a = 1\n\nb", ("\n\n",), 0) == "a = 1"  # cut already: it stays cut
    assert streamable("x = foo(", ("foo(bar)",), 0) == "x = "
    assert streamable("x\n    y\n  ", (), 4) == "x\n    y\n"  # the next line may be dedented
    assert streamable("x\n    y\n  z", (), 4) == "x\n    y\n"  # and is: the fill ends there
    assert streamable("x\n    y\n      ", (), 0) == "x\n    y\n      "


# -- the HTTP front -------------------------------------------------------------------------------
def test_a_streamed_infill_sends_pieces_that_join_to_the_plain_answer(
    client: httpx.Client,
) -> None:
    plain = client.post("/infill", headers=AUTH, json=LLAMA).json()
    *fills, last = events(client, "/infill", LLAMA)
    pieces = [e["content"] for e in fills]
    assert not any(e["stop"] for e in fills) and all(pieces)
    assert len(pieces) > 1, pieces  # the first blocks arrive before the fill is done
    assert "".join(pieces) == plain["content"]
    assert last["stop"] is True and last["content"] == ""
    assert last["tokens_predicted"] == plain["tokens_predicted"]


def test_a_finished_answer_streams_in_one_piece_at_the_end(client: httpx.Client) -> None:
    """By default the answer is what an editor would show: known only when the fill is done
    (the syntax check reads the whole text), so it comes whole, and is the plain answer."""
    for route, body, text in (
        ("/infill", {**LLAMA, "raw": False}, lambda e: e.get("content", "")),
        (
            "/v1/completions",
            {**OPENAI, "raw": False},
            lambda e: e["choices"][0]["text"] if e["choices"] else "",
        ),
    ):
        plain = client.post(route, headers=AUTH, json=body).json()
        want = plain["content"] if route == "/infill" else plain["choices"][0]["text"]
        raw = client.post(route, headers=AUTH, json={**body, "raw": True}).json()
        assert want != (raw["content"] if route == "/infill" else raw["choices"][0]["text"])
        pieces = [text(e) for e in events(client, route, body) if e != "[DONE]"]
        assert [p for p in pieces if p] == ([want] if want else [])


@pytest.mark.parametrize("cut", [{"stop": ["self"]}, {"stop": ["\n\n"]}, {"n_indent": 4}])
def test_a_streamed_infill_that_is_cut_streams_only_what_survives(
    client: httpx.Client, cut: dict[str, Any]
) -> None:
    body = {**LLAMA, **cut}
    plain = client.post("/infill", headers=AUTH, json=body).json()
    *fills, _ = events(client, "/infill", body)
    assert "".join(e["content"] for e in fills) == plain["content"]


def test_streamed_completions_send_pieces_that_join_to_the_plain_choices(
    client: httpx.Client,
) -> None:
    ask = {**OPENAI, "n": 2, "stream_options": {"include_usage": True}}
    plain = client.post("/v1/completions", headers=AUTH, json=ask).json()
    *chunks, usage, done = events(client, "/v1/completions", ask)
    assert done == "[DONE]" and usage["choices"] == [] and usage["usage"] == plain["usage"]
    assert len({c["id"] for c in [*chunks, usage]}) == 1  # one stream, one id
    for i, choice in enumerate(plain["choices"]):
        mine = [c["choices"][0] for c in chunks if c["choices"][0]["index"] == i]
        texts = [m["text"] for m in mine if m["finish_reason"] is None]
        assert len([t for t in texts if t]) > 1, texts
        assert "".join(texts) == choice["text"]
        assert [m["finish_reason"] for m in mine][-1] == choice["finish_reason"]
