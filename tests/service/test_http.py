"""The HTTP front over a real port with the real builtin engine: the routes and their shapes, the
token, the same fills as the msgpack front, hostile bodies (malformed, wrong types, huge, slow),
clients that go away (their rows are cancelled) and a storm of them; nothing stalls the others."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import builtin_engine
import httpx
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infill_engine import Engine
from infill_engine.scheduler import Scheduler
from infill_engine.service import (
    Address,
    ServeError,
    Service,
    ServiceClient,
    ServiceThread,
    check_listen,
    parse_address,
)

TOKEN = "http-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DOC = "def add(a, b):\n    return \n\n\ndef sub(a, b):\n    return a - b\n"
CURSOR = DOC.index("return ") + len("return ")


def fixed(span: int) -> dict[str, Any]:
    """`span` passes exactly (one token per pass, no early end), as wire params."""
    return {"span": span, "max_span": span, "threshold": 1.5, "min_tokens": span}


engine = builtin_engine.engine  # the module's engine fixture (builtin_engine.py)


@pytest.fixture(scope="module")
def served(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One service, both fronts: HTTP on a loopback port, msgpack on a Unix socket."""
    service = Service(
        engine,
        "builtin",
        TOKEN,
        body_timeout_s=1.0,
        scheduler=Scheduler(engine.live_batch, max_batch=8),
    )
    path = str(tmp_path_factory.mktemp("sock") / "s.sock")
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        # the msgpack front of the same service (its own loop thread, the same scheduler)
        unix = ServiceThread(service, Address("unix", path=path))
        unix.start()
        with httpx.Client(base_url=f"http://127.0.0.1:{http.bound.port}", timeout=60) as client:
            yield client, service, f"unix:{path}", http.bound.port
        unix.stop()


def wait_until(cond: Any, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def test_every_route_but_health_needs_the_bearer_token(served: Any) -> None:
    client, service, _, _ = served
    assert client.get("/health").json()["status"] == "ok"  # health is public, as llama.cpp's
    before = service.counters.unauthorized
    for method, route in (("GET", "/metrics"), ("GET", "/v1/models"), ("POST", "/infill"),
                          ("POST", "/v1/completions"), ("POST", "/v2/infill"),
                          ("POST", "/v2/refine")):  # fmt: skip
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            r = client.request(method, route, headers=headers, json={})
            assert r.status_code == 401, (route, headers)
            assert r.json()["error"]["type"] == "unauthorized"
    assert service.counters.unauthorized == before + 18
    assert client.get("/v1/models", headers=AUTH).json()["data"][0]["id"] == "builtin"


def test_http_refuses_to_start_without_a_token_or_off_loopback() -> None:
    with pytest.raises(ServeError, match="HTTP needs a token"):
        check_listen(parse_address("http://127.0.0.1:8012"), None, False)
    with pytest.raises(ServeError, match="not a loopback"):
        check_listen(parse_address("http://0.0.0.0:8012"), TOKEN, False)
    check_listen(parse_address("http://0.0.0.0:8012"), TOKEN, True)
    assert str(parse_address("http://[::1]:8012/")) == "http://[::1]:8012"
    with pytest.raises(ServeError):
        parse_address("http:127.0.0.1:8012")  # no //: not an HTTP address


def test_the_native_call_plans_on_the_service_and_both_fronts_agree(served: Any) -> None:
    """/v2/infill in JSON, in msgpack, and the msgpack front's v2/infill message: one plan and
    one fill, and the context range is where the model looked."""
    client, _, unix, _ = served
    ask = {"text": DOC, "offset": CURSOR, "languageId": "python", "trigger": "invoked",
           "candidates": 2, "params": {"threshold": 0.9}}  # fmt: skip
    r = client.post("/v2/infill", headers=AUTH, json=ask)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["plan"]["kind"] == "line" and body["plan"]["span"] >= 1
    assert len(body["items"]) == 2 and body["items"][0]["span"] != body["items"][1]["span"]
    assert body["context"] == {"start": 0, "end": len(DOC)}  # a short file is seen whole
    packed = client.post("/v2/infill", headers={**AUTH, "Content-Type": "application/msgpack"},
                         content=msgpack.packb(ask))  # fmt: skip
    assert packed.headers["content-type"] == "application/msgpack"
    assert msgpack.unpackb(packed.content)["items"] == _without_timings(body["items"], packed)
    with ServiceClient(unix, TOKEN) as c:
        reply = c.call("v2/infill", **ask)
    assert [i["text"] for i in reply["result"]["items"]] == [i["text"] for i in body["items"]]
    assert reply["result"]["plan"] == body["plan"]


def test_refine_over_http_is_the_msgpack_fronts_refine(served: Any) -> None:
    """/v2/refine (JSON and msgpack) and the msgpack front's `refine`: the same selection gives
    the same greedy text; a bad field is a 400 naming it, on both fronts alike."""
    client, _, unix, _ = served
    ask = {"prefix": "def add(a, b):\n    return ", "text": "a + b", "suffix": "\n",
           "fraction": 0.5}  # fmt: skip
    r = client.post("/v2/refine", headers=AUTH, json=ask)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["remasked"] and body["nfe"] >= 1 and isinstance(body["text"], str)
    packed = client.post("/v2/refine", headers={**AUTH, "Content-Type": "application/msgpack"},
                         content=msgpack.packb(ask))  # fmt: skip
    assert msgpack.unpackb(packed.content)["text"] == body["text"]
    with ServiceClient(unix, TOKEN) as c:
        reply = c.call("refine", **ask)
    assert reply["result"]["text"] == body["text"]
    for bad, says in (({"text": ""}, "text must not be empty"), ({"fraction": 2}, "fraction")):
        r = client.post("/v2/refine", headers=AUTH, json={**ask, **bad})
        assert r.status_code == 400 and says in r.json()["error"]["message"], r.text
        with ServiceClient(unix, TOKEN) as c:
            assert c.call("refine", **{**ask, **bad})["error"]["code"] == "bad_request"


def _without_timings(items: list[dict[str, Any]], packed: httpx.Response) -> list[Any]:
    """`items` with the other reply's timings, which differ from run to run."""
    other = msgpack.unpackb(packed.content)["items"]
    keys = ("elapsed_ms", "queue_ms", "batch_size")
    return [{**a, **{k: b[k] for k in keys}} for a, b in zip(items, other, strict=True)]


def test_llama_cpp_infill_reads_prompt_as_the_cursor_line_and_narrows_its_fields(
    served: Any,
) -> None:
    client, service, _, _ = served
    # the first function alone: no other line of its shape, so no draft takes the fill's place
    # (test_drafts_routes.py has those)
    doc = DOC[: DOC.index("\n\n")] + "\n"
    head, line = doc[:CURSOR].rsplit("\n", 1)
    llama = {"input_prefix": head + "\n", "prompt": line, "input_suffix": doc[CURSOR:],
             "n_predict": 24, "languageId": "python", "samplers": ["top_k"], "top_k": 40,
             "cache_prompt": True, "t_max_predict_ms": 500}  # fmt: skip
    r = client.post("/infill", headers=AUTH, json=llama)
    assert r.status_code == 200 and r.text.startswith('{"index":0,"content":"')  # compact JSON
    full = r.json()
    native = client.post("/v2/infill", headers=AUTH, json={
        "text": doc, "offset": CURSOR, "languageId": "python", "trigger": "invoked",
        "params": {"max_span": 24, "min_tokens": 1}}).json()  # fmt: skip
    assert native["drafts"] == []
    # what an editor would show, as the native reply's `shown` says; `raw`: the model's own
    shown = native["shown"]
    assert full["content"] == (shown[0]["text"] if shown else "")
    raw = client.post("/infill", headers=AUTH, json={**llama, "raw": True}).json()
    assert raw["content"] == native["items"][0]["text"]
    assert full["timings"]["predicted_n"] == native["items"][0]["tokens"]
    fields = ["content", "timings/predicted_n", "truncated", "no/such"]
    narrow = client.post("/infill", headers=AUTH, json={**llama, "response_fields": fields})
    assert narrow.json() == {"content": full["content"], "timings/predicted_n":
                             full["timings"]["predicted_n"], "truncated": False}  # fmt: skip
    submitted = service.scheduler.stats()["submitted"]
    warm = client.post("/infill", headers=AUTH, json={"input_extra": [{"text": "x = 1"}],
                                                       "n_predict": 0})  # fmt: skip
    assert warm.status_code == 200 and warm.json()["content"] == ""
    assert service.scheduler.stats()["submitted"] == submitted  # a warm-up runs no rows


def test_the_readmes_curl_prints_what_an_editor_would_show(served: Any) -> None:
    """The README's own /infill example, sent as curl sends it (no language, no token budget):
    the answer is the README's, finished text that compiles in place; the model's raw text
    (`raw`) is something else."""
    client, _, _, _ = served
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    body = json.loads(re.search(r"/infill -H [^\n]* -d '(\{.*?\})'", readme, re.S)[1])
    said = json.loads(
        re.search(r"^# (\{\"index\":0,\"content\".*?),\.\.\.\}$", readme, re.M)[1] + "}"
    )
    r = client.post("/infill", headers=AUTH, json=body)
    assert r.status_code == 200 and r.json()["content"] == said["content"] != ""
    compile(body["input_prefix"] + said["content"] + body["input_suffix"], "readme.py", "exec")
    raw = client.post("/infill", headers=AUTH, json={**body, "raw": True}).json()["content"]
    assert raw != said["content"]


def test_stop_strings_and_n_indent_cut_the_fill() -> None:
    from infill_engine.service.compat import clip

    assert clip("a + b\nfoo", ("\n",), 0) == ("a + b", "\n")
    assert clip("x\n    y\nz\n", (), 4) == ("x\n    y\n", None)  # z is indented less than 4
    assert clip("x\n\n    y", (), 4) == ("x\n\n    y", None)  # blank lines do not count


def test_openai_completions_fill_the_middle_and_stream(served: Any) -> None:
    client, _, _, _ = served
    ask = {"model": "builtin", "prompt": DOC[:CURSOR], "suffix": DOC[CURSOR:], "max_tokens": 16,
           "n": 2, "languageId": "python"}  # fmt: skip
    r = client.post("/v1/completions", headers=AUTH, json=ask)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "text_completion" and len(body["choices"]) == 2
    assert {c["finish_reason"] for c in body["choices"]} <= {"stop", "length"}
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    events = []
    with client.stream("POST", "/v1/completions", headers=AUTH, json={**ask, "stream": True}) as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        events = [line[6:] for line in s.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    texts = ["".join(c["choices"][0]["text"] for c in chunks if c["choices"][0]["index"] == i)
             for i in (0, 1)]  # fmt: skip
    assert texts == [c["text"] for c in body["choices"]]  # greedy: the same fills


@pytest.mark.parametrize(
    ("route", "body", "status"),
    [
        ("/v2/infill", b"{not json", 400),
        ("/v2/infill", b"[1, 2]", 400),
        ("/v2/infill", b'{"text": 3, "offset": 0}', 400),
        ("/v2/infill", b'{"text": "ab", "offset": 3}', 400),
        ("/v2/infill", b'{"text": "ab", "offset": 1, "trigger": "now"}', 400),
        ("/v2/infill", b'{"text": "ab", "offset": 1, "params": {"span": 0}}', 400),
        ("/infill", b'{"input_prefix": ["a"]}', 400),
        ("/infill", b'{"n_predict": "16"}', 400),
        ("/infill", b'{"input_extra": [{"text": 1}]}', 400),
        ("/v1/completions", b'{"prompt": "a", "n": 9}', 400),
        ("/v1/completions", b'{"prompt": "a", "stop": [1]}', 400),
        ("/v1/completions", b'{"prompt": "a", "temperature": true}', 400),
        ("/v1/completions", b'{"prompt": [1, 2]}', 400),
        ("/v2/infill", b"[" * 100_000 + b"]" * 100_000, 400),  # deep nesting
    ],
)
def test_malformed_bodies_get_a_400_that_says_why(
    served: Any, route: str, body: bytes, status: int
) -> None:
    client, _, _, _ = served
    r = client.post(route, headers=AUTH, content=body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == status and r.json()["error"]["message"]


def test_huge_and_slow_bodies_are_cut_off(served: Any) -> None:
    client, service, _, port = served
    r = client.post("/v2/infill", headers=AUTH, content=b"x" * (service.max_body + 1))
    assert r.status_code == 413

    def chunks() -> Iterator[bytes]:  # no content-length: counted as it arrives
        for _ in range(service.max_body // 65536 + 2):
            yield b" " * 65536

    assert client.post("/v2/infill", headers=AUTH, content=chunks()).status_code == 413
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:  # a slow sender
        s.sendall(b"POST /v2/infill HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                  TOKEN.encode() + b"\r\nContent-Length: 100\r\n\r\n{")  # fmt: skip
        t0 = time.monotonic()
        reply = s.recv(65536)
        assert time.monotonic() - t0 < 10
    assert reply.startswith(b"HTTP/1.1 408")
    assert client.get("/health").status_code == 200


def _post(port: int, body: dict[str, Any]) -> socket.socket:
    """Send a request on a connection of its own, not reading the answer."""
    raw = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"POST /v2/infill HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
              TOKEN.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " +
              str(len(raw)).encode() + b"\r\n\r\n" + raw)  # fmt: skip
    return s


def test_a_client_that_goes_away_has_its_rows_cancelled(served: Any) -> None:
    """Hung up while its row decodes: the row leaves the batch at its next step."""
    _, service, _, port = served
    stats0 = service.scheduler.stats()
    long = {"text": DOC, "offset": CURSOR, "languageId": "python", "params": fixed(200)}
    s = _post(port, long)
    wait_until(lambda: service.scheduler.stats()["running"] == 1)
    s.close()
    wait_until(lambda: service.scheduler.stats()["cancelled"] == stats0["cancelled"] + 1)
    wait_until(lambda: service.scheduler.stats()["running"] == 0)
    stats = service.scheduler.stats()
    assert stats["done"] == stats0["done"]  # it never ran to its end
    assert stats["passes"] - stats0["passes"] < 200  # it stopped well before its 200 passes


def test_a_streamed_call_that_goes_away_leaves_the_queue(engine: Engine) -> None:
    """Hung up while its row waits (the scheduler is paused): it leaves the queue."""
    scheduler = Scheduler(engine.live_batch, start=False)
    service = Service(engine, "builtin", TOKEN, scheduler=scheduler)
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        with httpx.Client(base_url=f"http://127.0.0.1:{http.bound.port}", timeout=60) as client:
            ask = {"prompt": DOC[:CURSOR], "max_tokens": 32, "stream": True}
            with client.stream("POST", "/v1/completions", headers=AUTH, json=ask) as r:
                assert r.status_code == 200  # the headers came before the fill
                wait_until(lambda: scheduler.stats()["queued"] == 1)
            wait_until(lambda: scheduler.stats()["cancelled"] == 1)
            assert scheduler.stats()["queued"] == 0 and scheduler.stats()["done"] == 0
            assert service.counters.disconnect_cancels == 1


def test_a_hundred_cancels_a_second_leave_nothing_behind(served: Any) -> None:
    """Two clients each post 100 long fills and hang up at once (100 a second or faster),
    while a third client's request decodes: it is answered as usual, and afterwards nothing
    is queued, running or held; each hung-up request was dropped before it was queued, or
    cancelled in the queue or the batch, or (rarely) ran to its end first."""
    client, service, _, port = served
    stats0 = service.scheduler.stats()
    counted = dict(service.metrics.requests)

    def storm() -> None:
        for i in range(100):
            _post(port, {"text": DOC * (1 + i % 3), "offset": CURSOR,
                         "params": fixed(64)}).close()  # fmt: skip
            time.sleep(0.005)

    threads = [threading.Thread(target=storm) for _ in range(2)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    r = client.post("/v2/infill", headers=AUTH, json={"text": DOC, "offset": CURSOR,
                                                      "params": fixed(8)})  # fmt: skip
    for t in threads:
        t.join(120)
    rate = 200 / (time.monotonic() - t0)
    assert r.status_code == 200 and r.json()["items"][0]["tokens"] >= 1
    key = ("http", "v2/infill", "cancelled")
    wait_until(lambda: service.metrics.requests[key] - counted.get(key, 0) +
               service.scheduler.stats()["done"] - stats0["done"] - 1 >= 200)  # fmt: skip
    wait_until(lambda: service.scheduler.stats()["running"] == 0)
    stats = service.scheduler.stats()
    assert stats["queued"] == 0 and stats["cache_bytes"] == 0
    ran = stats["done"] - stats0["done"] - 1
    queued = stats["submitted"] - stats0["submitted"] - 1
    assert queued == ran + stats["cancelled"] - stats0["cancelled"]  # none lost in the queue
    assert ran < 100, "most hung-up requests must have been cancelled, not run"
    print(
        f"\n  storm: {rate:.0f} hang-ups/s; {200 - queued} dropped before the queue, "
        f"{queued - ran} cancelled there or in the batch, {ran} ran to their end"
    )


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    route=st.sampled_from(["/infill", "/v1/completions", "/v2/infill"]),
    body=st.dictionaries(
        st.sampled_from(
            [
                "text",
                "offset",
                "end",
                "languageId",
                "trigger",
                "candidates",
                "params",
                "input_prefix",
                "input_suffix",
                "prompt",
                "input_extra",
                "n_predict",
                "stop",
                "n_indent",
                "response_fields",
                "suffix",
                "max_tokens",
                "n",
                "temperature",
                "top_p",
                "seed",
                "stream",
            ]
        ),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-(2**70), 2**70),
            st.floats(allow_nan=True),
            st.text(max_size=40),
            st.lists(st.one_of(st.text(max_size=8), st.integers()), max_size=4),
            st.dictionaries(
                st.sampled_from(["span", "text", "filename", "max_span"]),
                st.one_of(st.integers(-5, 9), st.text(max_size=8)),
            ),
        ),
        max_size=8,
    ),
)
def test_fuzzed_bodies_get_an_answer_or_a_4xx_and_never_a_500(
    served: Any, route: str, body: dict[str, Any]
) -> None:
    client, _, _, _ = served
    body = {**body, "max_tokens": 8, "n_predict": 8} if "stream" in body else body
    try:
        raw = json.dumps(body)
    except ValueError:
        return
    r = client.post(route, headers=AUTH, content=raw, timeout=30)
    assert r.status_code in (200, 400, 503), (route, body, r.text)
    if r.status_code != 200:
        assert r.json()["error"]["type"] in ("bad_request", "busy")


def test_metrics_count_what_was_served(served: Any) -> None:
    """The counters move by this test's own requests (whatever ran before it, or did not)."""
    client, _, unix, _ = served
    http = 'dllm_requests_total{code="%s",front="http",route="v2/infill"}'
    packed = 'dllm_requests_total{code="ok",front="msgpack",route="v2/infill"}'
    timed = 'dllm_request_seconds_bucket{front="http",le="+Inf",route="v2/infill"}'
    before = _metrics(client)
    ok = client.post("/v2/infill", headers=AUTH, json={"text": DOC, "offset": CURSOR})
    bad = client.post("/v2/infill", headers=AUTH, json={"text": "ab", "offset": 3})
    assert (ok.status_code, bad.status_code) == (200, 400)
    with ServiceClient(unix, TOKEN) as c:
        assert "result" in c.call("v2/infill", text=DOC, offset=CURSOR)
    after = _metrics(client)

    def moved(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert moved(http % "ok") >= 1 and moved(http % "bad_request") >= 1 and moved(packed) >= 1
    assert moved(timed) >= 1
    assert moved("dllm_tokens_total") >= 1 and moved("dllm_forward_passes_total") >= 1
    assert "dllm_queue_depth" in after and "dllm_running_rows" in after


def test_bench_serve_compares_the_fronts_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    from dllm_lab.bench_serve import main

    argv = ["--compare", "fronts", "--clients", "1,2", "--requests", "2", "--repeat", "1"]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["clients"], r["front"]) for r in rows] == [
        (1, "msgpack"), (1, "http"), (2, "msgpack"), (2, "http")]  # fmt: skip
    for r in rows:
        assert r["requests"] == 2 * r["clients"] and r["tok_per_s"] > 0
        if r["front"] == "msgpack":  # the baseline
            assert r["overhead_p50_ms"] == 0 and r["overhead_p95_ms"] == 0


def _accepted_socket(peer: tuple[str, int]) -> socket.socket:
    """The server's end of a loopback connection (this process's socket whose peer is `peer`):
    the socket the running server accepted, found among this process's descriptors."""
    for fd in map(int, os.listdir("/proc/self/fd")):
        with contextlib.suppress(OSError):
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(fd))
            try:
                if sock.type == socket.SOCK_STREAM and sock.getpeername() == peer:
                    return sock
            except OSError:
                pass
            sock.close()
    raise AssertionError(f"no socket of this process is connected to {peer}")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="finds sockets through /proc")
def test_the_http_socket_names_tcp_so_replies_are_not_held_for_a_delayed_ack(served: Any) -> None:
    """asyncio sets TCP_NODELAY only on connections of a socket whose protocol is IPPROTO_TCP;
    without it each reply (headers, then body) waited ~40 ms (bench-serve --compare fronts:
    HTTP p50 64 ms against msgpack 15 ms, before). Checked on the connection the running
    server accepted."""
    port = served[3]
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert client.recv(65536).startswith(b"HTTP/1.1 200")  # accepted, and answered
        with _accepted_socket(client.getsockname()[:2]) as accepted:
            assert accepted.getsockname()[1] == port  # the server's end, not the client's
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_a_selection_is_not_its_own_context(engine: Engine) -> None:
    """With `end`, the model sees the text around the selection (which the fill replaces), and
    `context.end` counts in the text sent, past the selection."""
    from infill_engine.hole import prepare
    from infill_engine.service.native import native_result, parse_native

    text = "def f(x):\n    y = OLD_CODE_HERE\n    return y\n"
    offset, end = text.index("OLD"), text.index("\n    return")
    ask = parse_native({"text": text, "offset": offset, "end": end, "languageId": "python",
                        "trigger": "command"})  # fmt: skip
    prepared = prepare(engine, ask)
    ctx = prepared.context
    assert ctx.prefix == text[:offset] and ctx.suffix == text[end:]
    assert "OLD" not in engine.decode_ids(list(ctx.prefix_ids) + list(ctx.suffix_ids))
    assert (ctx.prefix_start, ctx.suffix_end) == (0, len(text))
    assert prepared.plan.kind == "selection"
    assert native_result(ask, prepared, [], False)["context"] == {"start": 0, "end": len(text)}


# -- what llama.cpp, OpenAI and the docs say, and what /metrics counts -----------------------------
def test_no_such_route_and_a_wrong_method_are_json_errors(served: Any) -> None:
    """Starlette answered both in plain text, where every other error is a JSON object."""
    client, _, _, _ = served
    r = client.get("/no/such/route", headers=AUTH)
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found", r.text
    r = client.get("/v2/infill", headers=AUTH)
    assert r.status_code == 405 and r.json()["error"]["type"] == "method_not_allowed", r.text
    assert "POST" in r.headers["allow"]


def test_the_requests_model_is_echoed(served: Any) -> None:
    client, _, _, _ = served
    llama = {"input_prefix": DOC[:CURSOR], "input_suffix": DOC[CURSOR:], "n_predict": 4,
             "model": "qwen2.5-coder"}  # fmt: skip
    assert client.post("/infill", headers=AUTH, json=llama).json()["model"] == "qwen2.5-coder"
    openai = {"prompt": DOC[:CURSOR], "suffix": DOC[CURSOR:], "max_tokens": 4, "model": "gpt-x"}
    assert client.post("/v1/completions", headers=AUTH, json=openai).json()["model"] == "gpt-x"
    del openai["model"]  # none asked: the served model's name
    assert client.post("/v1/completions", headers=AUTH, json=openai).json()["model"] == "builtin"
    r = client.post("/v1/completions", headers=AUTH, json={**openai, "model": "m" * 300})
    assert r.status_code == 400 and "model" in r.json()["error"]["message"]


def _events(client: httpx.Client, route: str, body: dict[str, Any]) -> list[Any]:
    with client.stream("POST", route, headers=AUTH, json={**body, "stream": True}) as s:
        data = [line[6:] for line in s.iter_lines() if line.startswith("data: ")]
    return [e if e == "[DONE]" else json.loads(e) for e in data]


def test_the_last_infill_event_carries_timings_and_tokens_predicted(served: Any) -> None:
    """As llama.cpp's stream ends: the final event is the reply without content."""
    client, _, _, _ = served
    llama = {"input_prefix": DOC[:CURSOR], "input_suffix": DOC[CURSOR:], "n_predict": 8,
             "languageId": "python"}  # fmt: skip
    plain = client.post("/infill", headers=AUTH, json=llama).json()
    *fills, last = _events(client, "/infill", llama)
    assert [e["content"] for e in fills] == [plain["content"]] and not fills[0]["stop"]
    assert fills[0]["tokens_predicted"] == plain["tokens_predicted"]
    assert last["stop"] is True and last["content"] == ""
    assert last["tokens_predicted"] == plain["tokens_predicted"] >= 1
    assert last["timings"]["predicted_n"] == plain["tokens_predicted"]
    assert last["stop_type"] == plain["stop_type"] and last["model"] == "builtin"


def test_openai_usage_streams_once_and_only_when_asked(served: Any) -> None:
    """Usage was on every chunk; OpenAI sends it on one last chunk of no choices, and only
    under stream_options.include_usage (the other chunks then carry `usage: null`)."""
    client, _, _, _ = served
    ask = {"prompt": DOC[:CURSOR], "suffix": DOC[CURSOR:], "max_tokens": 8, "n": 2}
    *chunks, done = _events(client, "/v1/completions", ask)
    assert done == "[DONE]" and all("usage" not in c for c in chunks)
    *chunks, done = _events(client, "/v1/completions",
                            {**ask, "stream_options": {"include_usage": True}})  # fmt: skip
    *choices, usage = chunks
    assert all(c["usage"] is None and len(c["choices"]) == 1 for c in choices)
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] >= 1
    plain = client.post("/v1/completions", headers=AUTH, json=ask).json()
    assert usage["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]
    for bad in ([], {"include_usage": "yes"}):
        r = client.post("/v1/completions", headers=AUTH, json={**ask, "stream_options": bad})
        assert r.status_code == 400 and "stream_options" in r.json()["error"]["message"]


def test_n_cmpl_answers_that_many_fills_as_llama_cpp_does(served: Any) -> None:
    """llama.vscode asks for 3 fills to cycle through; a list of replies, each its index."""
    client, _, _, _ = served
    llama = {"input_prefix": DOC[:CURSOR], "input_suffix": DOC[CURSOR:], "n_predict": 16,
             "languageId": "python"}  # fmt: skip
    one = client.post("/infill", headers=AUTH, json=llama).json()
    many = client.post("/infill", headers=AUTH, json={**llama, "n_cmpl": 3}).json()
    assert isinstance(one, dict) and isinstance(many, list) and 2 <= len(many) <= 3
    assert [r["index"] for r in many] == list(range(len(many)))
    assert many[0]["content"] == one["content"]  # the planned span first, as alone
    events = _events(client, "/infill", {**llama, "n_cmpl": 3})
    assert [e["index"] for e in events if e["stop"]] == list(range(len(many)))
    warm = client.post("/infill", headers=AUTH, json={**llama, "n_cmpl": 2, "n_predict": 0})
    assert [r["content"] for r in warm.json()] == ["", ""]
    r = client.post("/infill", headers=AUTH, json={**llama, "n_cmpl": 9})
    assert r.status_code == 400 and "n_cmpl" in r.json()["error"]["message"]


def _metrics(client: httpx.Client) -> dict[str, float]:
    text = client.get("/metrics", headers=AUTH).text
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines()
                                     if not line.startswith("#"))}  # fmt: skip


def test_metrics_count_401s_busy_503s_and_hung_up_native_calls(engine: Engine) -> None:
    """401s and the front's busy 503s were answered before anything was counted; a client
    that hangs up on a plain /v2/infill is counted as a cancel (what the language server's
    HTTP cancels are)."""
    scheduler = Scheduler(engine.live_batch, max_batch=8)
    service = Service(engine, "builtin", TOKEN, http_slots=1, scheduler=scheduler)
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        port = http.bound.port
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            assert client.post("/v2/infill", json={}).status_code == 401
            assert client.get("/metrics").status_code == 401
            s = _post(port, {"text": DOC, "offset": CURSOR, "params": fixed(200)})  # the slot
            wait_until(lambda: scheduler.stats()["running"] == 1)
            busy = client.post("/infill", headers=AUTH, json={"prompt": "x = "})
            assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
            s.close()  # hung up: its rows are cancelled, and counted
            wait_until(lambda: service.metrics.requests[("http", "v2/infill", "cancelled")] == 1)
            wait_until(lambda: scheduler.stats()["cancelled"] == 1)  # at the row's next step
            m = _metrics(client)
    assert m['dllm_requests_total{code="unauthorized",front="http",route="v2/infill"}'] == 1
    assert m['dllm_requests_total{code="unauthorized",front="http",route="metrics"}'] == 1
    assert m['dllm_requests_total{code="busy",front="http",route="infill"}'] == 1
    assert m['dllm_requests_total{code="cancelled",front="http",route="v2/infill"}'] == 1
    assert m["dllm_service_disconnect_cancels_total"] == 1
    assert m["dllm_scheduler_cancelled_total"] == 1 and m["dllm_service_unauthorized_total"] == 2


def test_serve_prints_the_token_and_a_llama_vim_config_line(tmp_path: Any) -> None:
    """llama.vim without `api_key` gets 401s and shows nothing: serve says what to paste."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DLLM_SERVE_TOKEN": "s3cret'token"}
    argv = [sys.executable, "-m", "infill_engine.cli", "serve", "--listen", "http://127.0.0.1:0",
            "--device", "cpu"]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        lines = []
        while not any("llama.vim" in line for line in lines):
            line = proc.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
    finally:
        proc.terminate()
        proc.wait(30)
    out = "".join(lines)
    port = out.split("listening on http://127.0.0.1:", 1)[1].split()[0]
    assert "token (the API key of every client; Authorization: Bearer TOKEN): s3cret'token" in out
    assert (f"let g:llama_config = {{'endpoint_fim': 'http://127.0.0.1:{port}/infill', "
            "'api_key': 's3cret''token'}") in out  # fmt: skip
