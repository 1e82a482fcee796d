"""An OpenAI-compatible FIM API as the engine (`engineAddress: "openai+URL"`, hosted_fim.py):
against a Mercury-shaped stand-in on loopback (fim_standin.py: the documented request and
response shapes, streamed and not), against our own HTTP front's /v1/completions, and through
the real language server over stdio. The failures a user meets: a refused key, 429 with
Retry-After, 5xx, no answer in time, an address that does not answer, a bad request."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest
from fim_standin import KEY, MODEL, Answer, Standin, running
from lsp_client import SERVER, StdioPeer, init_params

from infill_engine import Engine, InfillParams, load, planner
from infill_engine.scheduler import Scheduler
from infill_engine.service import Service, ServiceThread, parse_address
from lsp_server.engines import hosted_fim
from lsp_server.engines.backend import Backend
from lsp_server.engines.engine_client import Hole, NotReady, Superseded
from lsp_server.engines.hosted_fim import FimEngineClient, approx_encode, cut_context
from lsp_server.engines.link import RemoteError
from lsp_server.engines.untrusted import retry_after_s
from lsp_server.options import EngineOptions, parse_options

TEXT = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"
OFFSET = TEXT.index("return ") + len("return ")
# what the stand-in's model writes: the line, then more than the hole wants
ANSWER = "a + b\n\n\ndef extra():\n    pass\n"


class Host:
    """A backend (the one writer of how the engine stands), and what it logs and tells the
    user."""

    def __init__(self) -> None:
        self.logs: list[str] = []
        self.told: list[str] = []
        self.backend = Backend(self.logs.append, self.told.append)
        self.backend.backoff_s = (0.05, 0.2)

    @property
    def state(self) -> str:
        return self.backend.state

    @property
    def error(self) -> str | None:
        return self.backend.error


def hole(cancel: threading.Event | None = None) -> Hole:
    return Hole(TEXT, OFFSET, None, "python", "invoked", 1, 1024, 512, InfillParams(),
                cancel or threading.Event())  # fmt: skip


async def client_for(
    address: str, host: Host, token: str | None = KEY, model: str | None = None
) -> FimEngineClient:
    options = EngineOptions(address=address, token=token, api_model=model)
    await host.backend.load(options, lambda _: None)  # the client is the backend's
    client = host.backend.client
    assert isinstance(client, FimEngineClient)
    return client


@pytest.fixture
def standin() -> Iterator[Standin]:
    with running(Standin(ANSWER)) as s:
        yield s


async def test_a_streamed_fim_completion_gets_our_plan_and_our_cut(standin: Standin) -> None:
    host = Host()
    client = await client_for("openai+" + standin.base, host)
    assert host.state == "ready" and client.model == MODEL  # the first of GET /v1/models
    filled = await client.fill(hole())
    (result,) = filled.results
    assert result.text == "a + b" and result.stop_reason == "syntax"  # the line's end
    (sent,) = standin.completions()
    assert sent.path == "/v1/fim/completions" and sent.auth == f"Bearer {KEY}"
    plan = planner.plan(TEXT, OFFSET, "python", approx_encode, max_positions=32768,
                        prefix_tokens=1024, suffix_tokens=512)  # fmt: skip
    assert plan.kind == "line"
    assert sent.body == {
        "model": MODEL,
        "prompt": TEXT[:OFFSET],
        "suffix": TEXT[OFFSET:],
        "max_tokens": plan.max_span,
        "stream": True,
        "temperature": 0.0,
    }
    assert filled.context(hole()) == (TEXT[:OFFSET], TEXT[OFFSET:])
    assert client.status()["api_route"] == "/fim/completions"
    client.close()


async def test_a_server_without_the_fim_route_is_asked_on_v1_completions() -> None:
    """vLLM and llama.cpp have no /fim/completions: 404 there, then OpenAI's route, kept."""
    with running(Standin(ANSWER, routes=("/v1/completions",))) as s:
        client = await client_for("openai+" + s.base, Host(), model="local")
        for _ in range(2):
            (result,) = (await client.fill(hole())).results
            assert result.text == "a + b"
        paths = [seen.path for seen in s.completions()]
        assert paths == ["/v1/fim/completions", "/v1/completions", "/v1/completions"]
        assert s.completions()[-1].body["model"] == "local"  # engineModel wins over /models
        client.close()


async def test_an_address_naming_a_route_uses_only_that_route(standin: Standin) -> None:
    client = await client_for(f"openai+{standin.base}/fim/completions", Host())
    await client.fill(hole())
    assert [seen.path for seen in standin.completions()] == ["/v1/fim/completions"]
    client.close()


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


async def test_our_own_http_front_serves_as_the_completion_api(engine: Engine) -> None:
    thread = ServiceThread(
        Service(engine, "builtin", "tok3n", scheduler=Scheduler(engine.live_batch, max_batch=4)),
        parse_address("http://127.0.0.1:0"),
    )
    bound = thread.start()
    try:
        host = Host()
        base = f"openai+http://127.0.0.1:{bound.port}/v1"
        client = await client_for(base, host, token="tok3n")
        assert host.state == "ready" and client.model == "builtin"
        filled = await client.fill(hole())
        assert client.route == "/completions"  # our front has no /fim/completions
        (result,) = filled.results
        assert result.stop_reason in ("syntax", "end_token", "span_full")
        assert "\n" not in result.text  # the rest of a line ends at its newline
        client.close()
    finally:
        thread.stop()


async def test_a_refused_key_fails_once_and_never_shows_the_key(standin: Standin) -> None:
    host = Host()
    client = await client_for("openai+" + standin.base, host, token="sk-wrong-secret")
    assert host.state == "failed" and "refused the key (HTTP 401)" in (host.error or "")
    assert "$DLLM_API_KEY" in (host.error or "")
    everything = json.dumps([host.error, host.logs, host.told, client.status()])
    assert "sk-wrong-secret" not in everything
    client.close()
    host = Host()
    client = await client_for("openai+" + standin.base, host, token=None)
    assert "no key is set" in (host.error or "")
    client.close()


async def test_429_waits_for_retry_after_and_5xx_backs_off(standin: Standin) -> None:
    host = Host()
    client = await client_for("openai+" + standin.base, host)
    standin.plan = [Answer(429, {"Retry-After": "30"}, "slow down")]
    with pytest.raises(NotReady, match=r"rate limiting .*retrying in 30 s"):
        await client.fill(hole())
    sent = len(standin.completions())
    with pytest.raises(NotReady, match="rate limiting"):
        await client.fill(hole())  # still paused: nothing is sent
    assert len(standin.completions()) == sent
    assert 29 < client.status()["paused_s"] <= 30
    assert len(host.told) == 1  # told once per episode

    client.paused_until = 0.0  # the 30 s have passed
    standin.plan = [Answer(503, message="overloaded"), Answer(502)]
    with pytest.raises(NotReady, match="HTTP 503: overloaded; retrying in 1 s"):
        await client.fill(hole())
    client.paused_until = 0.0
    with pytest.raises(NotReady, match=r"HTTP 502.*retrying in 2 s"):  # doubled
        await client.fill(hole())
    assert len(host.told) == 1 and host.state == "ready"
    client.paused_until = 0.0
    (result,) = (await client.fill(hole())).results  # back
    assert result.text == "a + b" and host.error is None
    assert client.pauses.failures == 0 and any("answers again" in m for m in host.logs)
    client.close()


async def test_no_answer_in_time_and_a_bad_request(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosted_fim, "DEADLINE_S", 0.3)
    client = await client_for("openai+" + standin.base, Host())
    held = threading.Event()  # the stand-in answers only after the client gave up
    standin.plan = [Answer(held=held)]
    try:
        with pytest.raises(NotReady, match=r"no answer from .* within 0.3 s; retrying in 1 s"):
            # 30 s: a guard, so that a deadline that never fires fails here (TimeoutError)
            # rather than at the suite's timeout; 100 times the 0.3 s it waits for
            await asyncio.wait_for(client.fill(hole()), 30)
    finally:
        held.set()
    client.paused_until = 0.0  # the pause a missed deadline starts has passed
    standin.plan = [Answer(400, message="model 'nope' does not exist")]
    with pytest.raises(RemoteError, match="HTTP 400: model 'nope' does not exist"):
        await client.fill(hole())
    client.close()


async def test_a_newer_request_supersedes_one_in_flight(standin: Standin) -> None:
    client = await client_for("openai+" + standin.base, Host())
    held = threading.Event()  # no answer until the fill is over: only the cancel can end it
    standin.plan = [Answer(held=held)]
    cancel = threading.Event()
    asyncio.get_running_loop().call_later(0.1, cancel.set)
    try:
        with pytest.raises(Superseded):
            await asyncio.wait_for(client.fill(hole(cancel)), 30)  # a guard, as above
    finally:
        held.set()
    client.close()


async def test_a_client_the_backend_let_go_cannot_change_how_it_stands(standin: Standin) -> None:
    """The backend is the one writer of its state: a settings change puts a new client in use,
    and the old one's late answer (a refused key, after the change) is no concern of it."""
    host = Host()
    old = await client_for("openai+" + standin.base, host)
    standin.plan = [Answer(401, message="that key was revoked", hang_s=0.5)]
    late = asyncio.ensure_future(host.backend.fill(hole()))
    while not standin.completions():
        await asyncio.sleep(0.01)
    new = await client_for("openai+" + standin.base, host, model="local")  # a settings change
    assert new is not old and host.state == "ready"
    with pytest.raises(NotReady):
        await late  # its caller hears of it: that fill ends
    assert host.state == "ready" and host.error is None and host.told == []
    assert (await host.backend.fill(hole())).results[0].text == "a + b"
    host.backend.close()


async def test_an_api_that_does_not_answer_is_retried_until_it_does() -> None:
    s = Standin(ANSWER)
    port = s.server.server_address[1]  # bound, not serving yet: connections wait, then time out
    s.server.socket.close()  # nothing listens: refused at once
    host = Host()
    client = await client_for(f"openai+http://127.0.0.1:{port}/v1", host)
    assert host.state == "failed" and "unreachable" in (host.error or "")
    assert "retrying" in (host.error or "")
    assert client.retrying
    client.close()
    await asyncio.sleep(0)
    assert not client.retrying


def test_the_address_form_and_the_settings() -> None:
    opts, errors = parse_options(
        {"engineAddress": "openai+https://api.inceptionlabs.ai/v1/", "engineModel": "mercury-coder",
         "engineApiKeyEnv": "INCEPTION_API_KEY", "quantize": "int4"}
    )  # fmt: skip
    assert errors == []
    e = opts.engine
    assert e.address == "openai+https://api.inceptionlabs.ai/v1"
    assert (e.api_model, e.key_env, e.quantize) == ("mercury-coder", "INCEPTION_API_KEY", "int4")
    assert hosted_fim.api_key(e, {"INCEPTION_API_KEY": "k1"}) == "k1"
    assert hosted_fim.api_key(EngineOptions(token="k2"), {"DLLM_API_KEY": "k1"}) == "k2"
    _, errors = parse_options({"engineAddress": "openai+https://me:sk-live-123@api.example/v1"})
    assert len(errors) == 1 and "credentials" in errors[0] and "sk-live-123" not in errors[0]
    for bad in ("openai+ftp://host/v1", "openai+https:///v1", "openai+https://h/v1?k=1"):
        _, errors = parse_options({"engineAddress": bad})
        assert len(errors) == 1 and "engineAddress" in errors[0], bad
    _, errors = parse_options({"quantize": "int3", "engineApiKeyEnv": "not a name"})
    assert len(errors) == 2 and "none, int8, int4" in errors[0]


def test_context_cut_and_retry_after() -> None:
    text = "".join(f"x{i} = {i}\n" for i in range(100))
    offset = text.index("x50")
    start, stop = cut_context(text, 0, offset, offset, len(text), 20, 10)
    assert text[start - 1] == "\n" and text[stop - 1] == "\n"  # whole lines
    assert len(approx_encode(text[start:offset])) <= 20
    assert len(approx_encode(text[offset:stop])) <= 10
    assert cut_context(text, 0, offset, offset, len(text), 0, 0) == (offset, offset)
    assert retry_after_s("7") == 7.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_s("soon") is None and retry_after_s(None) is None


def test_the_language_server_completes_through_a_mercury_shaped_api(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real server over stdio: the key from the environment, the stand-in's answer cut to
    the line by our finish, the key nowhere in what the server says or logs."""
    monkeypatch.setenv("DLLM_API_KEY", KEY)
    peer = StdioPeer([*SERVER[:-1], "DEBUG"])  # the most the server ever logs
    try:
        settings = {"engineAddress": "openai+" + standin.base, "model": "/nonexistent"}
        params = init_params(settings)
        from lsprotocol import converters

        raw = converters.get_converter().unstructure(params)
        peer.reply(peer.ask("initialize", raw))
        peer.notify("initialized", {})
        s = peer.wait_loaded(30)
        assert s["state"] == "ready", s["error"]
        assert s["service_model"] == MODEL and s["torch_loaded"] is False
        peer.open("file:///work/add.py", TEXT)
        position = {"line": 1, "character": len("    return ")}
        reply = peer.reply(
            peer.ask(
                "textDocument/inlineCompletion",
                {
                    "textDocument": {"uri": "file:///work/add.py"},
                    "position": position,
                    "context": {"triggerKind": 1},
                },
            )
        )
        items = reply["result"]["items"] if isinstance(reply["result"], dict) else reply["result"]
        assert [i["insertText"] for i in items] == ["a + b"], reply
        assert standin.completions()[0].auth == f"Bearer {KEY}"
        status = json.dumps(peer.status())
    finally:
        peer.kill()
    said = status + json.dumps([peer.shown, peer.logged]) + peer.stderr.decode(errors="replace")
    assert KEY not in said
