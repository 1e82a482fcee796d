"""Planted secrets on the HTTP front's compatible routes, with the builtin model: llama.cpp's
`/infill` drafts from its `input_extra` chunks, OpenAI's `/v1/completions` (plain and streamed)
from the prompt, and a line that recurs around the same lines as the cursor's is answered
(drafts.GATE). The same line with an ordinary value is answered, so the drafts path is live;
with a credential in it (a provider's token, a literal password, an AWS key id) the answer, or
every piece of the stream joined, never holds it, and `/metrics` counts it under its rule
(`dllm_secrets_filtered`).

The tokens are made at random here, never written out (tests/engine/test_secrets.py)."""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from typing import Any

import builtin_engine
import httpx
import pytest
from planted import ALNUM, token
from prometheus_client.parser import text_string_to_metric_families

from infill_engine import Engine
from infill_engine.scheduler import Scheduler
from infill_engine.service import Service, ServiceThread, parse_address

TOKEN = "secrets-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RNG = random.Random(5122026)


def _rand(n: int, alphabet: str = ALNUM) -> str:
    return token(RNG, n, alphabet)


TOKENS = {
    "github_token": "ghp_" + _rand(36),
    "assigned_secret": _rand(14),
    "aws_access_key": "AKIA" + _rand(16, string.ascii_uppercase + string.digits),
}
LINES = {  # kind -> the line a draft copies (its names bound); "control": an ordinary value
    "github_token": f'client = settings.Client(api_key="{TOKENS["github_token"]}")',
    "assigned_secret": f'client = settings.Client(password="{TOKENS["assigned_secret"]}")',
    "aws_access_key": f'client = settings.Client(aws_key_id="{TOKENS["aws_access_key"]}")',
    "control": "client = settings.Client(api_key=settings.API_KEY)",
}
OPENER = "def connect(settings):\n    session = open_session(settings)\n"
HOLE_PREFIX = OPENER + "    "
SUFFIX = "\n    return client\n"
KINDS = sorted(LINES)
SECRETS = [k for k in KINDS if k != "control"]


engine = builtin_engine.engine  # the module's engine fixture (builtin_engine.py)


@pytest.fixture(scope="module")
def client(engine: Engine) -> Iterator[httpx.Client]:
    service = Service(engine, "builtin", TOKEN, scheduler=Scheduler(engine.live_batch, max_batch=4))
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        with httpx.Client(base_url=f"http://127.0.0.1:{http.bound.port}", timeout=60) as c:
            yield c


def _blocks(line: str) -> str:
    """The cursor's function, twice, with `line` where the cursor is: a draft over the gate
    (drafts.GATE_MODEL's confidence about 0.84 from the prompt, 0.45 to 0.6 from a chunk)."""
    return f"{OPENER}    {line}\n    return client\n\n" * 2


def _leaks(text: str) -> bool:
    """Whether `text` holds any 8 characters running of a planted token."""
    return any(t[i : i + 8] in text for t in TOKENS.values() for i in range(len(t) - 7))


def _filtered(client: httpx.Client) -> dict[str, float]:
    """`dllm_secrets_filtered` by rule, as /metrics serves it."""
    r = client.get("/metrics", headers=AUTH)
    assert r.status_code == 200
    (family,) = [
        f for f in text_string_to_metric_families(r.text) if f.name == "dllm_secrets_filtered"
    ]
    return {s.labels["rule"]: s.value for s in family.samples if s.name.endswith("_total")}


def _infill(client: httpx.Client, line: str) -> str:
    """`/infill` where only another file's chunk has the line."""
    body = {"input_prefix": HOLE_PREFIX, "input_suffix": SUFFIX, "n_predict": 8,
            "input_extra": [{"filename": "users.py", "text": _blocks(line)}]}  # fmt: skip
    r = client.post("/infill", headers=AUTH, json=body)
    assert r.status_code == 200, r.text
    return str(r.json()["content"])


def _completion(client: httpx.Client, line: str) -> str:
    """`/v1/completions` with the line earlier in the prompt."""
    body = {"model": "builtin", "prompt": _blocks(line) + HOLE_PREFIX, "suffix": SUFFIX,
            "max_tokens": 8}  # fmt: skip
    r = client.post("/v1/completions", headers=AUTH, json=body)
    assert r.status_code == 200, r.text
    return str(r.json()["choices"][0]["text"])


def _streamed(client: httpx.Client, route: str, body: dict[str, Any]) -> str:
    """Every piece of a streamed answer, joined."""
    with client.stream("POST", route, headers=AUTH, json={**body, "stream": True}) as s:
        assert s.status_code == 200
        data = [line[6:] for line in s.iter_lines() if line.startswith("data: ")]
    events = [json.loads(d) for d in data if d != "[DONE]"]
    if route == "/infill":
        return "".join(e["content"] for e in events)
    return "".join(c["text"] for e in events for c in e["choices"])


def _completion_stream(client: httpx.Client, line: str) -> str:
    body = {"model": "builtin", "prompt": _blocks(line) + HOLE_PREFIX, "suffix": SUFFIX,
            "max_tokens": 8}  # fmt: skip
    return _streamed(client, "/v1/completions", body)


def _infill_stream(client: httpx.Client, line: str) -> str:
    body = {"input_prefix": HOLE_PREFIX, "input_suffix": SUFFIX, "n_predict": 8,
            "input_extra": [{"filename": "users.py", "text": _blocks(line)}]}  # fmt: skip
    return _streamed(client, "/infill", body)


ROUTES = {
    "infill": _infill,
    "infill-stream": _infill_stream,
    "completions": _completion,
    "completions-stream": _completion_stream,
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_an_ordinary_value_is_answered(client: httpx.Client, route: str) -> None:
    before = _filtered(client)
    assert ROUTES[route](client, LINES["control"]) == LINES["control"]
    assert _filtered(client) == before


@pytest.mark.parametrize("kind", SECRETS)
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_secret_is_never_answered_and_is_counted(
    client: httpx.Client, route: str, kind: str
) -> None:
    before = _filtered(client).get(kind, 0.0)
    text = ROUTES[route](client, LINES[kind])
    assert not _leaks(text), text
    assert _filtered(client).get(kind, 0.0) > before
