"""`dllm-infill serve` over real sockets with the real builtin engine: the handshake, several
clients at once, cancel, a client that dies mid-request, bad frames, tokens, and a fuzzed frame
decoder."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infill_engine import Engine, InfillParams, load
from infill_engine.cli import main as cli_main
from infill_engine.scheduler import Scheduler
from infill_engine.service import (
    MAX_FRAME,
    TOKEN_ENV,
    Address,
    FrameError,
    FrameReader,
    ServeError,
    Service,
    ServiceClient,
    ServiceError,
    ServiceThread,
    WirePlan,
    bind_unix,
    decode_frames,
    encode_frame,
    parse_address,
    read_token_file,
    resolve_token,
    socket_mode,
)
from infill_engine.stop import StopRule

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n"
TOKEN = "s3cret-token"


def fixed(span: int) -> dict[str, Any]:
    """`span` passes exactly (one token per pass, no early end), as wire params."""
    return {"span": span, "threshold": 1.5, "min_tokens": span}


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()  # its scheduler's and watchdog's threads end with the module


@pytest.fixture
def unix_service(engine: Engine, tmp_path: Path) -> Iterator[tuple[str, Service]]:
    path = str(tmp_path / "s.sock")
    service = Service(engine, "builtin", scheduler=Scheduler(engine.live_batch, max_batch=8))
    with ServiceThread(service, Address("unix", path=path)):
        yield f"unix:{path}", service


def wait_until(cond: Any, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def raw_connect(address: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(parse_address(address).path)
    return s


def read_one(s: socket.socket) -> dict[str, Any] | None:
    """The next message, or None when the server closed the connection."""
    reader = FrameReader()
    while True:
        data = s.recv(65536)
        if not data:
            return None
        items = reader.feed(data)
        if items:
            assert isinstance(items[0], dict)
            return items[0]


def greeted(address: str) -> socket.socket:
    s = raw_connect(address)
    s.sendall(encode_frame({"type": "hello", "version": 1}))
    hello = read_one(s)
    assert hello is not None and hello["type"] == "hello" and "error" not in hello
    return s


# -- the service ----------------------------------------------------------------------------------
def test_the_socket_is_owner_only_and_the_handshake_names_the_model(
    unix_service: tuple[str, Service],
) -> None:
    address, _ = unix_service
    assert socket_mode(parse_address(address).path) == 0o600
    with ServiceClient(address) as c:
        assert c.hello["version"] == 1 and c.hello["model"] == "builtin"
        health = c.call("health", rid="h1")
        assert health["id"] == "h1" and health["result"]["status"] == "ok"


def test_clients_at_once_get_their_own_replies_from_shared_passes(
    engine: Engine, tmp_path: Path
) -> None:
    prompts = [("def add(a, b):\n    return ", "\n"), ("x = [", "]\n"), ("import ", "\n")]
    expected = [engine.infill(p, s, InfillParams(**fixed(12))).text for p, s in prompts]
    path = str(tmp_path / "s.sock")
    service = Service(
        engine, "builtin", scheduler=Scheduler(engine.live_batch, max_batch=8, start=False)
    )
    replies: dict[int, list[dict[str, Any]]] = {}

    def client(k: int) -> None:
        with ServiceClient(f"unix:{path}") as c:
            ids = [c.request("infill", rid=f"c{k}-{i}", prefix=p, suffix=s, params=fixed(12))
                   for i, (p, s) in enumerate(prompts)]  # fmt: skip
            replies[k] = [c.reply(rid) for rid in reversed(ids)]

    with ServiceThread(service, Address("unix", path=path)):
        threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        wait_until(lambda: service.scheduler.stats()["queued"] == 9)
        service.scheduler.start()  # all nine wait: 8 join at once, the ninth when they end
        for t in threads:
            t.join(60)
        stats = service.scheduler.stats()
    assert sorted(replies) == [0, 1, 2]
    for k, got in replies.items():
        assert [m["id"] for m in got] == [f"c{k}-2", f"c{k}-1", f"c{k}-0"]
        assert [m["result"]["text"] for m in reversed(got)] == expected
    assert stats["done"] == 9 and stats["steps"] == 24 and stats["mean_batch"] == 4.5
    sizes = sorted(m["result"]["batch_size"] for got in replies.values() for m in got)
    assert sizes == [1] + [8] * 8


def test_a_client_that_does_not_read_is_dropped_without_holding_up_others(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "s.sock")
    service = Service(engine, "builtin", outbox=2, scheduler=Scheduler(engine.live_batch))
    with ServiceThread(service, Address("unix", path=path)), ServiceClient(f"unix:{path}") as c:
        hog = greeted(f"unix:{path}")
        burst = b"".join(encode_frame({"type": "health", "id": i}) for i in range(20000))
        with contextlib.suppress(OSError):
            hog.sendall(burst)  # and never reads a reply
        wait_until(lambda: service.counters.slow_readers == 1)
        assert c.infill(PREFIX, SUFFIX, fixed(8))["stop_reason"] == "span_full"
        hog.close()


def test_a_span_plan_travels_with_the_request(
    engine: Engine, unix_service: tuple[str, Service]
) -> None:
    address, _ = unix_service
    rule = StopRule(kind="line", newline=True)
    local = engine.infill("x = ", "\n", InfillParams(span="auto"), plan=WirePlan(4, 32, rule))
    wire = {"span": 4, "max_span": 32, "stop": {"kind": "line", "newline": True}}
    with ServiceClient(address) as c:
        remote = c.infill("x = ", "\n", {"span": "auto"}, plan=wire)
        assert remote["text"] == local.text and remote["stop_reason"] == local.stop_reason
        assert remote["grown"] == local.grown
        bad = c.call("infill", prefix="", suffix="", plan={"span": 4, "stop": {"kind": "x"}})
        assert bad["error"]["code"] == "bad_request" and "kind" in bad["error"]["message"]


def test_a_hostile_stop_rule_is_refused_or_run_and_never_stalls_the_service(
    unix_service: tuple[str, Service],
) -> None:
    address, _ = unix_service
    with ServiceClient(address, timeout=30) as c:
        # "" is a language with no line comment: it runs, and ends at the line's newline
        plan = {"span": 4, "max_span": 64, "stop": {"kind": "line", "comment": ""}}
        r = c.infill("x = 1\ny = ", "\nz = 3\n", {"span": "auto"}, plan=plan)
        assert "\n" not in r["text"]
        for comment in ("\n", " ", "\n#"):  # a mark with whitespace would stall the scan
            plan["stop"] = {"kind": "line", "comment": comment}
            bad = c.call("infill", prefix="x = ", suffix="\n", plan=plan)
            assert bad["error"]["code"] == "bad_request", bad
            assert "comment" in bad["error"]["message"]
        assert c.infill(PREFIX, SUFFIX, fixed(4))["stop_reason"] == "span_full"


def test_cancel_answers_the_request_with_cancelled(unix_service: tuple[str, Service]) -> None:
    address, service = unix_service
    with ServiceClient(address) as c:
        rid = c.request("infill", prefix=PREFIX, suffix=SUFFIX, params=fixed(256))
        wait_until(lambda: service.scheduler.stats()["running"] == 1)
        c.cancel(rid)
        reply = c.reply(rid)
        assert reply["error"]["code"] == "cancelled"
        c.cancel(12345)  # unknown ids are ignored: the request may just have finished
        assert c.call("health")["result"]["status"] == "ok"
        assert c.call("stats")["result"]["cancelled"] == 1


def test_a_client_that_dies_mid_request_has_its_work_cancelled(
    unix_service: tuple[str, Service],
) -> None:
    address, service = unix_service
    s = greeted(address)
    s.sendall(encode_frame({"type": "infill", "id": 1, "prefix": PREFIX, "suffix": SUFFIX,
                            "params": fixed(256)}))  # fmt: skip
    s.sendall(encode_frame({"type": "infill", "id": 2, "prefix": PREFIX, "suffix": SUFFIX,
                            "params": fixed(256), "priority": "command"}))  # fmt: skip
    wait_until(lambda: service.scheduler.stats()["running"] >= 1)
    s.close()
    wait_until(lambda: service.scheduler.stats()["running"] == 0, timeout=10)
    with ServiceClient(address) as c:
        stats = c.call("stats")["result"]
        assert stats["cancelled"] == 2 and stats["done"] == 0 and stats["queued"] == 0
        assert stats["service"]["disconnect_cancels"] == 2
        assert c.infill(PREFIX, SUFFIX, fixed(8))["stop_reason"] == "span_full"


def test_refine_edits_as_in_process_and_can_be_cancelled(
    engine: Engine, unix_service: tuple[str, Service]
) -> None:
    address, service = unix_service
    text = "a +  b"
    want = engine.refine(PREFIX, text, SUFFIX, 0.5, InfillParams(span=1))
    with ServiceClient(address) as c:
        got = c.call("refine", prefix=PREFIX, text=text, suffix=SUFFIX, fraction=0.5,
                     params={"span": 1})["result"]  # fmt: skip
        assert (got["text"], got["remasked"], got["changed"], got["nfe"]) == (
            want.text, want.remasked, want.changed, want.nfe,
        )  # fmt: skip
        bads = [({"fraction": 0}, "fraction"), ({"text": ""}, "text"), ({"text": 3}, "strings"),
                ({"params": {"span": -1}}, "span")]  # fmt: skip
        for bad, field in bads:
            reply = c.call("refine", **{"prefix": PREFIX, "text": text, **bad})
            assert reply["error"]["code"] == "bad_request" and field in reply["error"]["message"]
        long = "x = 1\n" * 60  # every token remasked, one per pass: hundreds of passes
        rid = c.request("refine", prefix=PREFIX, text=long, suffix=SUFFIX, fraction=1.0,
                        params={"span": 1, "threshold": 1.5})  # fmt: skip
        # a row of the running batch now, like a completion: cancelled at its next step
        wait_until(lambda: service.scheduler.stats()["running"] == 1)
        c.cancel(rid)
        reply = c.reply(rid)
        assert reply["error"]["code"] == "cancelled", reply
        assert "after" in reply["error"]["message"]  # it had started: cancelled mid-loop
        wait_until(lambda: service.scheduler.stats()["running"] == 0)
        assert c.call("health")["result"]["status"] == "ok"


def test_a_cancellation_storm_leaves_nothing_behind(unix_service: tuple[str, Service]) -> None:
    """Four clients each send 60 infills and cancel every one at once, while a long request
    decodes: every request is answered, and afterwards no slot, cache row or queue entry is
    left (the K/V cache is freed with the last row)."""
    address, service = unix_service
    answers: dict[int, list[str]] = {}

    def storm(k: int) -> None:
        with ServiceClient(address) as c:
            codes = []
            for i in range(60):
                rid = c.request("infill", rid=f"s{k}-{i}", prefix=PREFIX * (1 + i % 4),
                                suffix=SUFFIX, params=fixed(64))  # fmt: skip
                c.cancel(rid)
                reply = c.reply(rid)
                codes.append(reply["error"]["code"] if "error" in reply else "done")
            answers[k] = codes

    with ServiceClient(address) as main:
        long = main.request("infill", prefix=PREFIX, suffix=SUFFIX, params=fixed(200))
        wait_until(lambda: service.scheduler.stats()["running"] == 1)
        threads = [threading.Thread(target=storm, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert main.reply(long)["result"]["stop_reason"] == "span_full"  # untouched by it
        wait_until(lambda: service.scheduler.stats()["running"] == 0)
        stats = main.call("stats")["result"]
    assert sorted(answers) == [0, 1, 2, 3] and all(len(a) == 60 for a in answers.values())
    codes = [c for a in answers.values() for c in a]
    assert set(codes) <= {"cancelled", "done"} and codes.count("cancelled") >= 200
    assert stats["queued"] == 0 and stats["running"] == 0 and stats["inflight"] == 0
    assert stats["cache_bytes"] == 0  # the last row took its K/V with it
    assert stats["submitted"] == stats["done"] + stats["cancelled"] == 241


def test_bad_frames_are_answered_and_never_touch_other_clients(
    unix_service: tuple[str, Service],
) -> None:
    address, _ = unix_service
    bystander = ServiceClient(address)
    rid = bystander.request("infill", prefix=PREFIX, suffix=SUFFIX, params=fixed(16))

    s = greeted(address)
    s.sendall(struct.pack(">I", 3) + b"\xc1\xc1\xc1")  # 0xc1 is never valid msgpack
    assert (m := read_one(s)) is not None and m["error"]["code"] == "bad_frame"
    s.sendall(encode_frame({"type": "health", "id": 7}))  # still in step after it
    assert (m := read_one(s)) is not None and m["id"] == 7 and "result" in m
    body = msgpack.packb([1, 2, 3])
    s.sendall(struct.pack(">I", len(body)) + body)  # not a map
    assert (m := read_one(s)) is not None and m["error"]["code"] == "bad_frame"
    s.sendall(encode_frame({"type": "infill", "id": 8, "params": {"span": -1}}))
    assert (m := read_one(s)) is not None and m["id"] == 8
    assert m["error"]["code"] == "bad_request" and "span" in m["error"]["message"]
    s.sendall(encode_frame({"type": "nope", "id": 9}))
    assert (m := read_one(s)) is not None and m["error"]["code"] == "unknown_method"
    s.sendall(encode_frame({"type": "health"}))  # no id
    assert (m := read_one(s)) is not None and m["error"]["code"] == "bad_request"
    s.sendall(struct.pack(">I", MAX_FRAME + 1) + b"x" * 16)  # oversized: error, then closed
    assert (m := read_one(s)) is not None and m["error"]["code"] == "bad_frame"
    assert read_one(s) is None
    s.close()

    t = raw_connect(address)  # truncated: half a frame, then gone
    t.sendall(encode_frame({"type": "hello", "version": 1}))
    t.sendall(struct.pack(">I", 100) + b"\x81\xa4type")
    t.close()
    g = raw_connect(address)  # garbage instead of a hello: error and closed
    g.sendall(b"\x00\x00\x00\x02\xff\xff")
    assert (m := read_one(g)) is not None and m["error"]["code"] == "bad_frame"
    assert read_one(g) is None
    g.close()

    assert bystander.reply(rid)["result"]["stop_reason"] == "span_full"
    assert bystander.call("health")["result"]["status"] == "ok"
    bystander.close()


def test_the_handshake_comes_first_and_is_versioned(unix_service: tuple[str, Service]) -> None:
    address, _ = unix_service
    s = raw_connect(address)
    s.sendall(encode_frame({"type": "health", "id": 1}))
    assert (m := read_one(s)) is not None and m["error"]["code"] == "bad_request"
    assert read_one(s) is None
    s2 = raw_connect(address)
    s2.sendall(encode_frame({"type": "hello", "version": 2}))
    assert (m := read_one(s2)) is not None and m["error"]["code"] == "unsupported_version"
    assert read_one(s2) is None


def test_a_connection_has_a_cap_on_requests_in_flight(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    service = Service(
        engine, "builtin", max_inflight=2, scheduler=Scheduler(engine.live_batch, start=False)
    )
    with ServiceThread(service, Address("unix", path=path)), ServiceClient(f"unix:{path}") as c:
        for i in range(2):
            c.request("infill", rid=i, prefix=PREFIX, suffix=SUFFIX, params=fixed(8))
        assert c.call("infill", rid=2, prefix="", suffix="")["error"]["code"] == "busy"
        assert c.call("infill", rid=0, prefix="", suffix="")["error"]["code"] == "bad_request"
        service.scheduler.start()
        assert c.reply(0)["result"]["span"] == 8 and c.reply(1)["result"]["span"] == 8


def test_a_full_queue_and_a_deadline_come_back_as_error_codes(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "s.sock")
    service = Service(
        engine, "builtin", scheduler=Scheduler(engine.live_batch, max_queue=1, start=False)
    )
    with ServiceThread(service, Address("unix", path=path)), ServiceClient(f"unix:{path}") as c:
        first = c.request("infill", prefix=PREFIX, suffix=SUFFIX, params=fixed(8),
                          deadline_ms=1000)  # fmt: skip
        wait_until(lambda: service.scheduler.stats()["submitted"] == 1)
        assert c.call("infill", prefix=PREFIX, suffix=SUFFIX)["error"]["code"] == "busy"
        assert c.reply(first)["error"]["code"] == "deadline"


def test_a_stale_socket_file_is_replaced_and_a_live_one_refused(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "s.sock")
    stale = bind_unix(path)
    stale.close()  # the file stays, nobody listens
    assert os.path.exists(path)
    service = Service(engine, "builtin", scheduler=Scheduler(engine.live_batch))
    with ServiceThread(service, Address("unix", path=path)):
        with ServiceClient(f"unix:{path}") as c:
            assert c.call("health")["result"]["status"] == "ok"
        with pytest.raises(ServeError, match="another server"):
            bind_unix(path)
    assert not os.path.exists(path)
    (tmp_path / "plain").write_text("mine")
    with pytest.raises(ServeError, match="not a socket"):
        bind_unix(str(tmp_path / "plain"))


# -- TCP and tokens -------------------------------------------------------------------------------
def test_tcp_needs_the_token(engine: Engine) -> None:
    service = Service(engine, "builtin", token=TOKEN, scheduler=Scheduler(engine.live_batch))
    with ServiceThread(service, Address("tcp", host="127.0.0.1", port=0)) as st:
        assert st.bound is not None and st.bound.port > 0
        address = str(st.bound)
        for token in (None, "wrong", TOKEN + "x", ""):
            with pytest.raises(ServiceError) as e:
                ServiceClient(address, token=token)
            assert e.value.code == "unauthorized"
        with ServiceClient(address, token=TOKEN) as c:
            assert c.infill(PREFIX, SUFFIX, fixed(8))["tokens"] == 8
        assert service.counters.unauthorized == 4


def test_tcp_refuses_to_start_without_a_token_or_off_loopback(engine: Engine) -> None:
    service = Service(engine, "builtin", token=None, scheduler=Scheduler(engine.live_batch))
    with pytest.raises(ServeError, match="token"):
        ServiceThread(service, Address("tcp", host="127.0.0.1", port=0)).start()
    service = Service(engine, "builtin", token=TOKEN, scheduler=Scheduler(engine.live_batch))
    with pytest.raises(ServeError, match="allow-remote"):
        ServiceThread(service, Address("tcp", host="0.0.0.0", port=0)).start()


def test_token_files_must_be_owner_only(tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    f.chmod(0o644)
    with pytest.raises(ServeError, match="chmod 600"):
        read_token_file(f)
    f.chmod(0o600)
    assert read_token_file(f) == TOKEN
    assert resolve_token(None, {TOKEN_ENV: "from-env"}) == "from-env"
    assert resolve_token(str(f), {TOKEN_ENV: "from-env"}) == TOKEN
    assert resolve_token(None, {}) is None


def test_serve_cli_refuses_bad_setups_before_loading_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    f = tmp_path / "token"
    f.write_text(TOKEN)
    f.chmod(0o640)
    assert cli_main(["serve", "--listen", "tcp:127.0.0.1:0", "--token-file", str(f)]) == 2
    assert "chmod 600" in capsys.readouterr().err
    assert cli_main(["serve", "--listen", "tcp:127.0.0.1:0"]) == 2
    assert TOKEN_ENV in capsys.readouterr().err
    f.chmod(0o600)
    argv = ["serve", "--listen", "tcp:0.0.0.0:0", "--token-file", str(f)]
    assert cli_main(argv) == 2
    assert "--allow-remote" in capsys.readouterr().err
    assert cli_main(["serve", "--listen", "udp:x"]) == 2


# -- the frame decoder ----------------------------------------------------------------------------
def test_frames_round_trip_in_any_chunking() -> None:
    messages = [{"type": "infill", "id": i, "prefix": "x" * i, "params": {"span": 8}}
                for i in range(5)]  # fmt: skip
    stream = b"".join(encode_frame(m) for m in messages)
    for size in (1, 3, 7, len(stream)):
        reader = FrameReader()
        got: list[Any] = []
        for i in range(0, len(stream), size):
            got += reader.feed(stream[i : i + size])
        assert got == messages and reader.pending == 0
    items, rest = decode_frames(stream + stream[:10])
    assert items == messages and rest == stream[:10]


def test_an_oversized_frame_is_fatal_and_stops_the_stream() -> None:
    ok = encode_frame({"type": "health", "id": 1})
    items, rest = decode_frames(ok + struct.pack(">I", 100) + b"x" * 100, max_frame=50)
    assert items[0] == {"type": "health", "id": 1}
    assert isinstance(items[1], FrameError) and items[1].fatal
    assert rest.startswith(struct.pack(">I", 100))
    with pytest.raises(FrameError):
        encode_frame({"text": "x" * 100}, max_frame=50)


def check_decoded(buffer: bytes, items: list[Any], rest: bytes) -> None:
    assert buffer.endswith(rest)
    for i, item in enumerate(items):
        assert isinstance(item, dict | FrameError)
        if isinstance(item, dict):
            assert all(isinstance(k, str) for k in item)
        if isinstance(item, FrameError) and item.fatal:
            assert i == len(items) - 1
    if not (items and isinstance(items[-1], FrameError) and items[-1].fatal):
        n = int.from_bytes(rest[:4], "big") if len(rest) >= 4 else -1
        assert len(rest) < 4 or len(rest) < 4 + n  # nothing complete left behind


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_fuzz_arbitrary_bytes_never_raise(buffer: bytes) -> None:
    items, rest = decode_frames(buffer, max_frame=1024)
    check_decoded(buffer, items, rest)
    reader = FrameReader(max_frame=1024)
    fed = [*reader.feed(buffer[: len(buffer) // 2]), *reader.feed(buffer[len(buffer) // 2 :])]
    fatal = [i for i, x in enumerate(fed) if isinstance(x, FrameError) and x.fatal]
    fed = fed[: fatal[0] + 1] if fatal else fed  # a broken reader repeats its error
    assert [type(x) for x in fed] == [type(x) for x in items]
    assert [x for x in fed if isinstance(x, dict)] == [x for x in items if isinstance(x, dict)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=64), max_size=8), st.binary(max_size=8))
def test_fuzz_framed_garbage_keeps_the_stream_in_step(bodies: list[bytes], tail: bytes) -> None:
    """Each well-framed body is a message or an error in its place; the stream never slips."""
    buffer = b"".join(struct.pack(">I", len(b)) + b for b in bodies) + tail
    items, rest = decode_frames(buffer)
    check_decoded(buffer, items, rest)
    assert len(items) >= len(bodies)
    for body, item in zip(bodies, items, strict=False):
        if isinstance(item, dict):
            assert msgpack.unpackb(body, raw=False) == item


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                   max_size=4),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=10), json_values, max_size=6), max_size=5))
def test_fuzz_maps_round_trip(messages: list[dict[str, Any]]) -> None:
    stream = b"".join(encode_frame(m) for m in messages)
    items, rest = decode_frames(stream)
    assert items == messages and rest == b""


def test_bench_serve_measures_both_settings_side_by_side(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from dllm_lab.bench_serve import main

    assert main(["--clients", "2", "--requests", "2", "--repeat", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["clients"], r["max_batch"]) for r in rows] == [(2, 1), (2, 8)]
    assert all(
        r["requests"] == 4 and r["req_per_s"] > 0 and r["p95_ms"] >= r["p50_ms"] for r in rows
    )
    assert rows[0]["gain"] == 1.0 and rows[0]["mean_batch"] == 1.0
