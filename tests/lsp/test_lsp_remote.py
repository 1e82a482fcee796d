"""The language server as a client of `dllm-infill serve` (engineAddress): a real service on a
real socket in this process, the real builtin engine behind it, and the server's real Backend
and Completer (and, last, the real language server over stdio) in front. The client is thin:
each hole is one `v2/infill`, planned and cut by the service (test_thin_remote.py checks that
nothing of the model is loaded on the client's side).

Nothing here waits for time to pass: the client's reconnection back-off goes through a hook
that records each delay and holds the next attempt until the test lets it go, and the
service's worker is held (its on_join hook) until a request it must cancel is flagged."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lsp_client import GREET, inline, item_text, open_doc, start, status, wait_for
from pytest_lsp import LanguageClient

from infill_engine import Engine, InfillParams, load
from infill_engine.scheduler import Scheduler, Ticket
from infill_engine.service import TOKEN_ENV, Address, Service, ServiceThread
from lsp_server.commands.editing import fill_function_body
from lsp_server.completion.inline import Ask, Completer
from lsp_server.engines.backend import Backend, NotReady, Superseded
from lsp_server.engines.engine_client import Filled, Hole
from lsp_server.engines.link import engine_address
from lsp_server.options import EngineOptions, Options, describe, parse_options

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n"
TOKEN = "s3cret-token"
# One token per pass over a long span, no cache, no early end: a request of many seconds.
SLOW = InfillParams(span=300, max_span=300, decode="fixed", min_tokens=300, cache="none")
GREEDY = InfillParams(span=16, max_span=64, min_tokens=1)


def hole(params: InfillParams = GREEDY, cancel: threading.Event | None = None) -> Hole:
    """The hole between PREFIX and SUFFIX, one candidate, at an editor's priority."""
    text = PREFIX + SUFFIX
    event = cancel if cancel is not None else threading.Event()
    return Hole(text, len(PREFIX), None, "python", "invoked", 1, 1024, 512, params, event)


async def fill(backend: Backend, params: InfillParams = GREEDY) -> Filled:
    return await backend.fill(hole(params))


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()  # its scheduler's and watchdog's threads end with the module


def start_service(
    engine: Engine,
    address: Address,
    token: str | None = None,
    on_join: Callable[[list[Ticket]], None] | None = None,
) -> ServiceThread:
    scheduler = Scheduler(engine.live_batch, max_batch=8, on_join=on_join)
    thread = ServiceThread(Service(engine, "builtin", token, scheduler=scheduler), address)
    thread.start()
    return thread


@pytest.fixture
def sock(tmp_path: Path) -> str:
    return str(tmp_path / "s.sock")


@pytest.fixture
def service(engine: Engine, sock: str) -> Iterator[ServiceThread]:
    thread = start_service(engine, Address("unix", path=sock))
    yield thread
    thread.stop()


class Told:
    """What the backend logged, and what it told the user (window/showMessage)."""

    def __init__(self) -> None:
        self.logs: list[str] = []
        self.tells: list[str] = []


async def remote_backend(address: str, told: Told | None = None, **engine: str) -> Backend:
    told = told or Told()
    backend = Backend(told.logs.append, told.tells.append)
    backend.backoff_s = (0.05, 0.2)  # reconnect quickly in tests
    await backend.load(EngineOptions(address=address, **engine), lambda _: None)
    return backend


class Backoff:
    """The client's wait before each reconnection attempt (`RemoteClient.sleep`): it records
    the delay and returns at once for the first `free` attempts; later ones wait for `go`."""

    def __init__(self, free: int) -> None:
        self.delays: list[float] = []
        self.free = free
        self.go = asyncio.Event()

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if len(self.delays) > self.free:
            await self.go.wait()


def in_process_backend(engine: Engine) -> Backend:
    return Backend(lambda _: None, engine=engine)  # the model the service runs, loaded once


async def test_remote_completions_equal_in_process_ones(
    engine: Engine, service: ServiceThread
) -> None:
    remote = await remote_backend(f"unix:{service.address.path}")
    local = in_process_backend(engine)
    try:
        assert remote.state == "ready", remote.error
        status_ = remote.status()
        assert status_["engine_address"] == f"unix:{service.address.path}"
        assert status_["service_model"] == "builtin" and status_["device"] is None
        assert remote.engine is None  # no stand-in: nothing of the model here

        # the same hole and greedy params: the same fill, token for token, from the same context
        got, want = await fill(remote), await fill(local)
        for a, b in zip(got.results, want.results, strict=True):
            assert (a.text, a.tokens, a.stop_reason, a.nfe, a.span) == (
                b.text, b.tokens, b.stop_reason, b.nfe, b.span,
            )  # fmt: skip
        assert (got.kind, got.span, got.start, got.stop) == (
            want.kind, want.span, want.start, want.stop,
        )  # fmt: skip
        assert got.results[0].text and got.kind == "line"

        # the whole completion path: plan, context, several spans, finishing
        opts = Options()
        ask = Ask("file:///a.py", GREET, GREET.index("\n    \n") + 5, "python", invoked=True)
        remote_texts = await Completer(remote, lambda _: None).complete(ask, opts)
        local_texts = await Completer(local, lambda _: None).complete(ask, opts)
        assert remote_texts and remote_texts == local_texts
        assert service.service.scheduler.stats()["done"] >= 2  # the fill, and the candidates
        assert remote.status()["requests"] == 2 and remote.status()["model_calls"] == 2

        # a command: the service plans the empty body and cuts the context as the engine here
        at = GREET.index("\n    \n") + 5
        got_body = await fill_function_body(remote, GREET, at, "python", opts)
        want_body = await fill_function_body(local, GREET, at, "python", opts)
        assert got_body == want_body
        assert remote.status()["last"]["kind"] == local.status()["last"]["kind"] == "statement"

        # refine runs in the service too, and edits exactly as in-process
        text = PREFIX + "a +  b" + SUFFIX
        job = Hole(text, len(PREFIX), len(PREFIX) + 6, "python", "command", 1, 1024, 512, GREEDY,
                   threading.Event())  # fmt: skip
        got_r, want_r = await remote.refine(job, 0.5), await local.refine(job, 0.5)
        assert (got_r.text, got_r.remasked, got_r.changed) == (
            want_r.text, want_r.remasked, want_r.changed,
        )  # fmt: skip
        assert got_r.nfe == want_r.nfe >= 2 and remote.status()["requests"] == 4
    finally:
        remote.close()
        local.close()


def hold_until_cancelled(tickets: list[Ticket]) -> None:
    """The service's on_join hook: its worker takes no step until the joining request's cancel
    flag is set (by a `cancel {id}` from the client), so only a cancel ends a 300-pass fill
    early, and it must end it before its first pass."""
    for ticket in tickets:
        ticket.cancel_event.wait(30)


async def test_cancelling_stops_the_remote_request(engine: Engine, sock: str) -> None:
    service = start_service(engine, Address("unix", path=sock), on_join=hold_until_cancelled)
    remote = await remote_backend(f"unix:{sock}")
    scheduler = service.service.scheduler
    try:
        # a newer request sets the flag: `cancel {id}` goes out, the call is superseded
        cancel = threading.Event()
        task = asyncio.create_task(remote.fill(hole(SLOW, cancel)))
        await wait_for(lambda: scheduler.stats()["running"] == 1, timeout=30)
        cancel.set()
        with pytest.raises(Superseded):
            await task
        await wait_for(lambda: scheduler.stats()["running"] == 0, timeout=30)
        assert scheduler.stats()["cancelled"] == 1
        assert scheduler.stats()["passes"] == 0  # not one of the 300 passes ran

        # the editor cancels the LSP request: the handler's task is cancelled, and so is the work
        task = asyncio.create_task(fill(remote, SLOW))
        await wait_for(lambda: scheduler.stats()["running"] == 1, timeout=30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_for(lambda: scheduler.stats()["cancelled"] == 2, timeout=30)
        await wait_for(lambda: scheduler.stats()["running"] == 0, timeout=30)
        assert scheduler.stats()["passes"] == 0 and scheduler.stats()["done"] == 0

        # a flag set before the call: nothing is sent at all
        done = scheduler.stats()["submitted"]
        flagged = threading.Event()
        flagged.set()
        with pytest.raises(Superseded):
            await remote.fill(hole(GREEDY, flagged))
        assert scheduler.stats()["submitted"] == done
        assert remote.status()["cancelled"] == 1  # the superseded one; the other was cancelled
    finally:
        remote.close()
        service.stop()


async def test_refine_cuts_its_context_by_tokens_in_the_service_as_in_process(
    engine: Engine, service: ServiceThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refine is a hole on both sides: the service plans and cuts its context to the budgets
    by tokens, as the in-process engine does, not the characters of the window sent."""
    remote = await remote_backend(f"unix:{service.address.path}")
    local = Backend(lambda _: None, engine=engine)  # not closed: the service's engine too
    seen: list[tuple[str, str, str]] = []
    real = engine.remask  # the scoring pass: what the model sees, on both sides

    def remask(prefix: str, text: str, suffix: str, **options: Any) -> Any:
        seen.append((prefix, text, suffix))
        return real(prefix, text, suffix, **options)

    monkeypatch.setattr(engine, "remask", remask)
    lines = "".join(f"x{i} = {i}\n" for i in range(150))
    text = lines + PREFIX + "a +  b" + SUFFIX + lines
    at = len(lines) + len(PREFIX)
    job = Hole(text, at, at + 6, "python", "command", 1, 24, 8, GREEDY, threading.Event())
    try:
        got, want = await remote.refine(job, 0.5), await local.refine(job, 0.5)
    finally:
        remote.close()
    (there, here) = seen
    assert there == here  # the same context, cut the same way
    prefix, selection, suffix = here
    assert selection == "a +  b" and prefix.endswith(PREFIX) and len(prefix) < 200 < len(lines)
    assert suffix.startswith(SUFFIX) and len(suffix) < 100
    assert (got.text, got.remasked, got.changed) == (want.text, want.remasked, want.changed)
    with pytest.raises(ValueError, match="needs a selection"):
        await local.refine(hole(), 0.5)


async def test_a_service_that_goes_away_is_one_message_and_comes_back(
    engine: Engine, service: ServiceThread, sock: str
) -> None:
    told = Told()
    remote = await remote_backend(f"unix:{sock}", told)
    restarted: ServiceThread | None = None
    client = remote.remote
    assert client is not None and client.attempts == 1
    backoff = client.sleep = Backoff(free=3)
    try:
        assert (await fill(remote)).results[0].text
        await asyncio.to_thread(service.stop)
        await wait_for(lambda: remote.state == "failed", timeout=10)
        for _ in range(5):  # keystrokes while it is down: no completion, no more messages
            with pytest.raises(NotReady, match="no completions until it is back"):
                await fill(remote)
        # three reconnection attempts fail; the fourth waits for the test
        await wait_for(lambda: len(backoff.delays) == 4, timeout=10)
        assert client.attempts == 1 + 3
        assert backoff.delays == [0.05, 0.1, 0.2, 0.2]  # doubling, up to the longest delay
        assert len(told.tells) == 1 and sock in told.tells[0]  # failed attempts tell nothing

        restarted = await asyncio.to_thread(start_service, engine, Address("unix", path=sock))
        backoff.go.set()
        await wait_for(lambda: remote.state == "ready", timeout=10)
        assert client.attempts == 1 + 4 and len(backoff.delays) == 4  # it connected at once
        assert (await fill(remote)).results[0].text
        assert len(told.tells) == 1 and any("is back" in line for line in told.logs)
        assert remote.status()["reconnects"] == 1 and remote.error is None
        assert remote.remote is client
    finally:
        remote.close()
        if restarted is not None:
            restarted.stop()


async def test_a_service_that_is_not_up_yet_is_waited_for(engine: Engine, sock: str) -> None:
    told = Told()
    remote = await remote_backend(f"unix:{sock}", told)
    thread: ServiceThread | None = None
    client = remote.remote
    assert client is not None
    backoff = client.sleep = Backoff(free=1)  # one more attempt, then each waits for `go`
    try:
        assert remote.state == "failed" and "unreachable" in (remote.error or "")
        with pytest.raises(NotReady):
            await fill(remote)
        await wait_for(lambda: len(backoff.delays) == 2, timeout=10)
        assert client.attempts >= 2 and remote.state == "failed"  # a retry failed too
        thread = await asyncio.to_thread(start_service, engine, Address("unix", path=sock))
        backoff.go.set()
        await wait_for(lambda: remote.state == "ready", timeout=10)
        assert (await fill(remote)).results[0].text
        assert told.tells == []  # the server reports how the load ended; nothing was lost
    finally:
        remote.close()
        if thread is not None:
            thread.stop()


async def test_tcp_with_the_token_from_the_setting_or_the_environment(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = start_service(engine, Address("tcp", host="127.0.0.1", port=0), token=TOKEN)
    assert thread.bound is not None
    address = f"tcp://127.0.0.1:{thread.bound.port}"
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    backends = []
    try:
        wrong = await remote_backend(address, token="not-it")
        backends.append(wrong)
        assert wrong.state == "failed" and "unauthorized" in (wrong.error or "")
        assert "engineToken" in (wrong.error or "")
        assert wrong.remote is None or wrong.remote.closed  # retrying cannot help

        right = await remote_backend(address, token=TOKEN)
        backends.append(right)
        assert right.state == "ready", right.error

        monkeypatch.setenv(TOKEN_ENV, TOKEN)
        from_env = await remote_backend(address)
        backends.append(from_env)
        assert from_env.state == "ready", from_env.error
        assert (await fill(from_env)).results[0].text
    finally:
        for b in backends:
            b.close()
        thread.stop()


def test_engine_address_and_token_settings() -> None:
    opts, errors = parse_options({"engineAddress": "tcp://127.0.0.1:7301", "engineToken": "t"})
    assert errors == []
    assert opts.engine.address == "tcp:127.0.0.1:7301" and opts.engine.token == "t"
    assert engine_address(opts.engine.address) == Address("tcp", host="127.0.0.1", port=7301)
    assert describe(opts)["engineToken"] == "(set)"  # never the secret itself
    assert "token" not in repr(opts.engine)
    opts, errors = parse_options({"engineAddress": "unix:/run/dllm.sock"})
    assert errors == [] and opts.engine.address == "unix:/run/dllm.sock"
    opts, errors = parse_options({"engineAddress": ""})
    assert errors == [] and opts.engine.address is None

    opts, errors = parse_options({"engineAddress": "http://127.0.0.1:7302"})
    assert errors == [] and opts.engine.address == "http://127.0.0.1:7302"
    assert engine_address(opts.engine.address) == Address("http", host="127.0.0.1", port=7302)

    bad_ones = ("localhost:7301", "tcp://127.0.0.1", "tcp://:80", "unix:", "http:x:1", 7301)
    for bad in (*bad_ones, "http://127.0.0.1", "https://x:1", "http://x:0"):
        opts, errors = parse_options({"engineAddress": bad})
        assert len(errors) == 1, bad
        assert "'engineAddress'" in errors[0], errors
        assert "tcp://HOST:PORT" in errors[0] or "port" in errors[0], errors
        assert opts.engine.address is None  # in-process, as before
    opts, errors = parse_options({"engineToken": 42})
    assert len(errors) == 1 and "'engineToken'" in errors[0] and opts.engine.token is None


async def test_the_language_server_completes_through_the_service(
    client: LanguageClient, service: ServiceThread, sock: str
) -> None:
    address = f"unix:{sock}"
    await start(client, settings={"engineAddress": address})
    s = await status(client)
    assert s["state"] == "ready", s["error"]
    assert s["engine_address"] == address and s["service_model"] == "builtin"
    assert s["settings"]["engineAddress"] == address
    uri = "file:///work/remote.py"
    open_doc(client, uri, GREET)
    items = await inline(client, uri, 2, 4)
    assert items and all(item_text(i).strip() for i in items)
    assert service.service.scheduler.stats()["done"] >= 1
    assert (await status(client))["model_calls"] == 1

    # the service goes away: one message, and empty answers where the same hole was just
    # filled (in documents of their own, so that no typed-ahead entry answers). Coming back
    # is the Backend's (the same object as above), tested with its back-off observed.
    await asyncio.to_thread(service.stop)
    await wait_for(lambda: any(sock in m.message for m in client.messages), timeout=10)
    for k in range(3):  # keystrokes while it is down: no completion, no more messages
        other = f"file:///work/remote{k}.py"
        open_doc(client, other, GREET)
        assert await inline(client, other, 2, 4) == []
    assert len([m for m in client.messages if sock in m.message]) == 1
    s = await status(client)
    assert s["state"] == "failed" and s["model_calls"] == 1  # the model was not asked
