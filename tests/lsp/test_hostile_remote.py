"""A hosted completion API that answers as an attacker would (hostile_standin.py): 50 MB three
ways and a gzip bomb, a text that never ends, an endless `: ping` stream, a slow drip, JSON
that is malformed or costly to parse, an error message with terminal escapes and line breaks,
`Retry-After: 999999` and `1e400`.

For each, the client alone (in process: the error and its words), then the real language
server over stdio at `--log-level DEBUG`, with a 1 s deadline: the request ends by its deadline
with no items, the server's RSS grows by less than 100 MB while it runs, `dllm/status` answers
while it is in flight, no line the server writes or says holds a raw ESC or CR, and the key
(`engineToken`, in the initialize params pygls logs) is nowhere in stderr.
"""

from __future__ import annotations

import logging
import re
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fim_standin import running
from hostile_standin import ANSWERS, FORGED, KEY, MODEL, SERVICE_ANSWERS, Hostile, Service
from lsp_client import StdioPeer, init_params
from procfs import rss_mib

from infill_engine import InfillParams
from lsp_server.engines import hosted_fim, http_link, untrusted
from lsp_server.engines.backend import Backend
from lsp_server.engines.backoff import Backoff
from lsp_server.engines.engine_client import Hole, NotReady
from lsp_server.engines.hosted_fim import FimEngineClient
from lsp_server.engines.link import RemoteError
from lsp_server.options import EngineOptions

DEADLINE_S = 1.0
MARGIN_S = 2.0  # past the deadline: a loaded 2-core machine's scheduling, not the client's wait
TEXT = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"
OFFSET = TEXT.index("return ") + len("return ")
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f]")  # a raw control character (LF aside: lines)

# mode: (the error, its code for a RemoteError, what its message says); None: no error
OUTCOMES: dict[str, tuple[type[Exception] | None, str | None, str]] = {
    "huge_events": (RemoteError, "too_large", r"larger than 4096 KiB"),
    "huge_line": (RemoteError, "too_large", r"larger than 4096 KiB"),
    "huge_json": (RemoteError, "too_large", r"larger than 4096 KiB"),
    "gzip_bomb": (RemoteError, "bad_reply", r"encoded as 'gzip', which was not asked for"),
    "long_text": (RemoteError, "too_large", r"text is longer than 8192 characters"),
    "pings": (NotReady, None, r"no answer from .* within 1 s; retrying in 1 s"),
    "drip": (NotReady, None, r"no answer from .* within 1 s; retrying in 1 s"),
    "not_json": (RemoteError, "bad_reply", r"not JSON"),
    "deep_json": (RemoteError, "bad_reply", r"not JSON"),
    "wide_json": (RemoteError, "bad_reply", r"more than 50000 JSON values"),
    "long_ints": (RemoteError, "bad_reply", r"not JSON"),
    "largest_allowed": (None, None, ""),  # what the caps let through costs little downstream
    "control_400": (RemoteError, "http_400", r"HTTP 400: \\x1b\[2J\\x1b\[31mboom\\x0d\\x0aERROR"),
    "control_503": (NotReady, None, r"HTTP 503: \\x1b\[2J.*\\u202e\\x07; retrying in 1 s"),
    "retry_999999": (NotReady, None, r"rate limiting \(HTTP 429\); retrying in 60 s"),
    "retry_1e400": (NotReady, None, r"rate limiting \(HTTP 429\); retrying in 1 s"),
}
FIGURES: dict[str, dict[str, float]] = {}  # mode: what the served run measured


def test_every_hostile_mode_has_an_outcome() -> None:
    assert set(OUTCOMES) == set(ANSWERS)


@pytest.fixture(scope="module")
def hostile() -> Iterator[Hostile]:
    with running(Hostile()) as h:
        yield h


def hole() -> Hole:
    return Hole(TEXT, OFFSET, None, "python", "invoked", 1, 1024, 512, InfillParams(),
                threading.Event())  # fmt: skip


# -- the client ----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", list(OUTCOMES))
async def test_the_client_ends_a_hostile_answer_by_its_deadline(
    mode: str, hostile: Hostile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosted_fim, "DEADLINE_S", DEADLINE_S)
    logs: list[str] = []
    told: list[str] = []
    backend = Backend(logs.append, told.append)
    await backend.load(EngineOptions(address="openai+" + hostile.base(mode), token=KEY), print)
    client = backend.client
    assert isinstance(client, FimEngineClient) and client.model == MODEL
    kind, code, words = OUTCOMES[mode]
    t0 = time.perf_counter()
    if kind is None:
        (result,) = (await client.fill(hole())).results
        assert 7_500 < len(result.text) <= untrusted.MAX_TEXT_CHARS
        backend.close()
        return
    with pytest.raises(kind) as caught:
        await client.fill(hole())
    took = time.perf_counter() - t0
    assert hostile.asked(mode) == 1
    assert took < DEADLINE_S + MARGIN_S, took
    if mode in ("pings", "drip"):
        assert took >= DEADLINE_S * 0.9  # the deadline ended it, nothing before
    error = caught.value
    assert re.search(words, str(error)), str(error)
    if code is not None:
        assert isinstance(error, RemoteError) and error.code == code
    assert client.status()["paused_s"] <= untrusted.MAX_RETRY_AFTER_S
    said = [str(error), backend.error or "", *logs, *told]
    assert not any(RAW.search(s) or "\n" in s for s in said), said
    assert all(len(s) < 600 for s in said)  # the remote's part of a message is cut at 200
    backend.close()


# the engine service's HTTP front, as hostile: (its code, what the message says)
SERVICE_OUTCOMES = {
    "huge": ("too_large", r"larger than 4096 KiB"),
    "drip": ("deadline", r"no answer within 1 s"),
    "control": ("http_500", r"http_500: \\x1b\[2J\\x1b\[31mboom\\x0d\\x0aERROR"),
    "bad_shape": ("bad_reply", r"a v2/infill reply of the wrong shape"),
    "not_json": ("bad_reply", r"not JSON"),
}


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    with running(Service()) as s:
        yield s


def test_every_service_mode_has_an_outcome() -> None:
    assert set(SERVICE_OUTCOMES) == set(SERVICE_ANSWERS)


@pytest.mark.parametrize("mode", list(SERVICE_OUTCOMES))
async def test_the_service_client_ends_a_hostile_answer_by_its_deadline(
    mode: str, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`engineAddress: http://...`: the same bounds as for a hosted API, and the connection
    stands after each."""
    monkeypatch.setattr(http_link, "DEADLINE_S", DEADLINE_S)
    logs: list[str] = []
    backend = Backend(logs.append)
    await backend.load(EngineOptions(address=service.address), print)
    assert backend.state == "ready" and backend.status()["service_model"] == MODEL
    service.mode = mode
    code, words = SERVICE_OUTCOMES[mode]
    t0 = time.perf_counter()
    with pytest.raises(RemoteError) as caught:
        await backend.fill(hole())
    assert time.perf_counter() - t0 < DEADLINE_S + MARGIN_S
    assert caught.value.code == code and re.search(words, str(caught.value)), caught.value
    said = [str(caught.value), *logs]
    assert not any(RAW.search(s) or "\n" in s for s in said), said
    assert backend.state == "ready"  # the connection stands
    backend.close()


def test_retry_after_and_the_backoff() -> None:
    r = untrusted.retry_after_s
    assert r("999999") == 60.0 and r("30") == 30.0 and r("1.5") == 1.5
    for junk in ("1e400", "inf", "nan", "-5", "soon", "", None, "9" * 100):
        assert r(junk) is None, junk
    assert r("Fri, 31 Dec 9999 23:59:59 GMT") == 60.0
    assert r("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date gone by: now
    b = Backoff(1.0, 60.0)
    assert [b.next() for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert b.after("5") == 5.0 and b.after("1e400") == 60.0
    b.reset()
    assert b.next() == 1.0


def test_shown_escapes_controls_and_cuts() -> None:
    s = untrusted.shown(FORGED + "y" * 500)
    assert not RAW.search(s) and "\n" not in s and "\u202e" not in s
    assert s.startswith("\\x1b[2J\\x1b[31mboom\\x0d\\x0aERROR") and s.endswith("y...")
    assert len(s) < 260


def test_the_secret_filter_redacts_what_pygls_and_httpx_would_log() -> None:
    untrusted.guard_logs([KEY])
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    keep = Keep()
    pygls = logging.getLogger("pygls.protocol.language_server")
    level = pygls.level
    pygls.addHandler(keep)
    pygls.setLevel(logging.DEBUG)
    try:
        options = {"engineToken": "sk-other-secret-1", "engineAddress": "openai+http://h/v1"}
        pygls.info("Language server initialized %s", {"initialization_options": options})
        pygls.debug('Sending data: {"apiKey": "sk-other-secret-2", "x": 1}')
        pygls.debug("headers %s", {"Authorization": "Bearer sk-other-secret-3"})
        pygls.debug("the key in use: %s", KEY)
        logging.getLogger("httpx").addHandler(keep)
        logging.getLogger("httpx").warning('HTTP Request: POST u "HTTP/1.1 400 \x1b[31mred"')
    finally:
        pygls.removeHandler(keep)
        pygls.setLevel(level)
        logging.getLogger("httpx").removeHandler(keep)
    everything = "\n".join(records)
    assert len(records) == 5 and "sk-other-secret" not in everything and KEY not in everything
    assert "'engineToken': '***'" in everything and "openai+http://h/v1" in everything
    assert "\x1b" not in everything and "\\x1b[31mred" in everything


def test_json_costs_are_bounded() -> None:
    loads = untrusted.loads
    assert loads(b'{"choices": [{"text": "a, b: [c]"}], "n": 12345}')["n"] == 12345
    for bad in (b"[" * 40_000, b"[" + b"1," * 60_000 + b"1]", b"[" + b"9" * 50 + b"]", b"\xff"):
        with pytest.raises(untrusted.BadAnswer):
            loads(bad)


# -- the language server ---------------------------------------------------------------------------
# The server with a 1 s deadline (a constant of the client's, not a user's setting).
BOOT = (
    "import sys; from lsp_server.engines import hosted_fim; "
    "hosted_fim.DEADLINE_S = float(sys.argv.pop(1)); "
    "from lsp_server.cli import main; sys.exit(main())"
)
URI = "file:///work/add.py"


def reset_peak(pid: int) -> bool:
    """VmHWM starts again from VmRSS (Linux 4.0 and later), so that it is this case's peak."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def switch(peer: StdioPeer, address: str) -> None:
    """A settings change to `address`: a new client, no pause carried over."""
    peer.notify("workspace/didChangeConfiguration", {"settings": {"engineAddress": address}})
    deadline = time.monotonic() + 20
    while (s := peer.status())["engine_address"] != address or s["state"] != "ready":
        assert time.monotonic() < deadline, s
        time.sleep(0.05)


@pytest.fixture(scope="module")
def served(hostile: Hostile) -> Iterator[StdioPeer]:
    if not Path("/proc/self/status").exists():
        pytest.skip("RSS is read from /proc")
    peer = StdioPeer([sys.executable, "-c", BOOT, str(DEADLINE_S), "--log-level", "DEBUG"])
    try:
        settings = {"engineAddress": "openai+" + hostile.base("retry_1e400"), "engineToken": KEY}
        from lsprotocol import converters

        raw = converters.get_converter().unstructure(init_params(settings))
        peer.reply(peer.ask("initialize", raw))
        peer.notify("initialized", {})
        assert peer.wait_loaded(30)["state"] == "ready"
        peer.open(URI, TEXT)
        yield peer
    finally:
        peer.kill()
    stderr = peer.stderr.decode(errors="replace")
    if FIGURES:
        print("\nhostile answers through the server (deadline 1 s):")
        for mode, f in FIGURES.items():
            print(f"  {mode:13} " + "  ".join(f"{k} {v:.3g}" for k, v in f.items()))
    # the key went in the initialize params, which pygls logs at DEBUG: redacted there
    assert "Language server initialized" in stderr
    assert KEY not in stderr, "the key is in the server's log"
    assert "\x1b" not in stderr and "\r" not in stderr
    assert not any(line.startswith("ERROR dllm: forged") for line in stderr.splitlines())
    for said in (*peer.shown, *peer.logged):
        assert not RAW.search(said) and KEY not in said, said


@pytest.mark.parametrize("mode", list(OUTCOMES))
def test_the_server_serves_on_while_a_hostile_answer_runs(
    mode: str, hostile: Hostile, served: StdioPeer
) -> None:
    peer = served
    switch(peer, "openai+" + hostile.base(mode))
    pid = peer.proc.pid
    before = rss_mib(pid)
    exact = reset_peak(pid)  # else the peak is what the samples below saw
    shown0, logged0 = len(peer.shown), len(peer.logged)
    idle = []  # dllm/status's latency with nothing in flight, on this machine as loaded as now
    for _ in range(10):
        s0 = time.perf_counter()
        peer.status()
        idle.append(time.perf_counter() - s0)
    position = {"line": 1, "character": len("    return ")}
    ended: dict[str, Any] = {}
    t0 = time.perf_counter()
    rid = peer.ask(
        "textDocument/inlineCompletion",
        {"textDocument": {"uri": URI}, "position": position, "context": {"triggerKind": 1}},
    )

    def wait() -> None:
        ended["reply"] = peer.reply(rid, timeout=DEADLINE_S + 30)
        ended["s"] = time.perf_counter() - t0

    waiter = threading.Thread(target=wait)
    waiter.start()
    latencies, peak = [], before
    while "s" not in ended:  # dllm/status asked while the request is in flight, and the RSS
        s0 = time.perf_counter()
        status = peer.status()
        latencies.append(time.perf_counter() - s0)
        peak = max(peak, rss_mib(pid))
        time.sleep(0.02)
    waiter.join()
    after = rss_mib(pid)
    if exact:
        peak = max(peak, rss_mib(pid, "VmHWM"))
    reply = ended["reply"]
    result = reply["result"]
    items = result["items"] if isinstance(result, dict) else result
    kind, _, words = OUTCOMES[mode]
    assert items == [] or kind is None, reply
    assert hostile.asked(mode) >= 1
    assert ended["s"] < DEADLINE_S + MARGIN_S, ended
    assert peak - before < 100 and after - before < 100, (before, peak, after)
    # The spec is 100 ms (0.6-2 ms measured here). No fixed bound on a shared machine: the
    # median holds the spec or ten times the idle median of this run, whichever is larger, and
    # no sample waits for the hostile answer itself (a blocked loop would wait its deadline).
    assert latencies, "dllm/status was never asked while the request ran"
    assert statistics.median(latencies) < max(0.1, 10 * statistics.median(idle)), latencies
    assert max(latencies) < DEADLINE_S / 2, latencies
    said = " ".join([*peer.shown[shown0:], *peer.logged[logged0:], str(status.get("error"))])
    assert re.search(words, said), said
    FIGURES[mode] = {
        "ended_s": ended["s"],
        "rss_peak_growth_mib": peak - before,
        "rss_growth_mib": after - before,
        "status_median_ms": 1000 * statistics.median(latencies),
        "status_max_ms": 1000 * max(latencies),
        "status_samples": len(latencies),
    }
