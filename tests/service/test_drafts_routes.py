"""Drafts on the HTTP front's three routes, with the builtin model: the service drafts from what
a request carries (its text, its other files' chunks), so /v2/infill replies with them beside
the model's fills, and llama.cpp's /infill and OpenAI's /v1/completions answer with a draft the
ranking puts first (one over the gate). A client's own drafts are checked like any field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from infill_engine import Engine, load
from infill_engine.drafts import GATE, GATE_MODEL, Draft
from infill_engine.scheduler import Scheduler
from infill_engine.service import Service, ServiceThread, parse_address

TOKEN = "drafts-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BLOCK = (
    "def {0}(db):\n"
    "    rows = db.query('x')\n"
    "    result = [dict(r) for r in rows]\n"
    "    return result\n\n"
)
PREFIX = BLOCK.format("a") + BLOCK.format("b") + "def c(db):\n    rows = db.query('x')\n    "
SUFFIX = "\n    return result\n"
LINE = "result = [dict(r) for r in rows]"
PARAMS = {"span": 4, "max_span": 4}


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    engine: Engine = load("builtin", device="cpu")
    service = Service(engine, "builtin", TOKEN, scheduler=Scheduler(engine.live_batch, max_batch=4))
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        with httpx.Client(base_url=f"http://127.0.0.1:{http.bound.port}", timeout=60) as c:
            yield c
    engine.close()


def _native(client: httpx.Client, **more: Any) -> httpx.Response:
    body = {"text": PREFIX + SUFFIX, "offset": len(PREFIX), "languageId": "python",
            "params": PARAMS, **more}  # fmt: skip
    return client.post("/v2/infill", headers=AUTH, json=body)


def test_the_native_reply_carries_the_drafts_beside_the_fills(client: httpx.Client) -> None:
    body = _native(client).json()
    assert body["items"]  # the model's fills, as before
    first = body["drafts"][0]
    assert first["text"] == LINE and first["source"] == "document" and first["votes"] == 2
    assert GATE_MODEL.confidence([Draft.from_wire(d) for d in body["drafts"]], "") >= GATE
    assert _native(client, draft=False).json()["drafts"] == []


def test_a_clients_drafts_are_merged_and_checked(client: httpx.Client) -> None:
    mine = {"text": "result = fetch_all(rows)", "source": "workspace", "score": 99.0}
    body = _native(client, drafts=[mine]).json()
    assert body["drafts"][0] == {**mine, "where": "", "features": [], "votes": 1}
    for bad, why in (
        ("x", "drafts must be a list"),
        ([{"text": ""}], "a draft's text"),
        ([{"text": "y", "source": "elsewhere"}], "a draft's source"),
        ([{"text": "y", "score": "high"}], "a draft's score"),
        ([{"text": "y", "features": [1, "a"]}], "a draft's features"),
        ([{"text": "y", "votes": 0}], "a draft's votes"),
    ):
        r = _native(client, drafts=bad)
        assert r.status_code == 400 and why in r.json()["error"]["message"], r.text


def test_llama_cpp_infill_answers_with_the_draft(client: httpx.Client) -> None:
    body = {"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 4}
    r = client.post("/infill", headers=AUTH, json=body)
    assert r.status_code == 200, r.text
    assert r.json()["content"] == LINE


def test_llama_cpp_input_extra_is_drafted_from(client: httpx.Client) -> None:
    # the document alone has no such line; another file's chunk has it, twice, around the
    # same lines as the cursor's
    doc = '    """Each r of the rows as a dict."""\n    rows = db.query(\'x\')\n'
    other = "".join(f"def {n}(db):\n{doc}    {LINE}\n    return result\n\n" for n in "ab")
    body = {"input_prefix": f"def c(db):\n{doc}    ", "input_suffix": SUFFIX,
            "input_extra": [{"filename": "users.py", "text": other}], "n_predict": 4}  # fmt: skip
    assert client.post("/infill", headers=AUTH, json=body).json()["content"] == LINE
    del body["input_extra"]
    assert client.post("/infill", headers=AUTH, json=body).json()["content"] != LINE


def test_openai_completions_answer_with_the_draft(client: httpx.Client) -> None:
    body = {"model": "builtin", "prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 4}
    r = client.post("/v1/completions", headers=AUTH, json=body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == LINE


def test_a_clients_draft_rides_into_the_decoding(client: httpx.Client) -> None:
    """With `speculate`, the drafts a call carries reach the block loop: in the fast mode a
    draft the model predicts back (here its own plain fill, sent back as a client's draft) is
    committed at once, in fewer passes; the exact mode decodes what plain decoding does."""
    params = {"span": 16, "max_span": 16, "min_tokens": 8}
    off = _native(client, params=params, draft=False).json()["items"][0]
    assert len(off["text"]) >= 3
    mine = [{"text": off["text"], "source": "workspace", "score": 99.0}]
    fills = {
        mode: _native(client, params={**params, "speculate": mode}, drafts=mine)
        .json()["items"][0]
        for mode in ("exact", "fast")
    }  # fmt: skip
    fast, exact = fills["fast"], fills["exact"]
    assert fast["drafted"] > 0 and fast["text"].startswith(off["text"])
    passes = {m: f["nfe_full"] + f["nfe_block"] for m, f in (*fills.items(), ("off", off))}
    assert passes["fast"] < passes["off"]
    assert exact["text"] == off["text"] and exact["drafted"] == 0
    assert passes["exact"] + exact["verified"] == passes["off"]
