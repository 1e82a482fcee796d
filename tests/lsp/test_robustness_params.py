"""Malformed requests, odd text and a rude exit, end to end: the real server over stdio.

pytest-lsp's client checks what it sends against lsprotocol, so it cannot send a malformed
request; these tests speak raw JSON-RPC frames instead (a small driver below). Every request
with an id must get an answer: a result, or an error with a short message and no traceback.
Malformed params never pop up a message in the editor, and the server keeps serving.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsp_client import SERVER, SLOW, StdioPeer, init_params
from pygls.protocol import default_converter

URI = "file:///work/robust.py"
SOURCE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    \n"
CLIENT_ERRORS = (-32602, -32600, -32601)  # InvalidParams, InvalidRequest, MethodNotFound
FAST = {"decode": {"maxSpan": 8, "span": 8}, "candidates": 1}  # keep model calls short


class Raw(StdioPeer):
    """The server on stdio, started with short model calls."""

    def request(self, method: Any, params: Any = None, omit: bool = False, **extra: Any) -> Any:
        """Send a request; return its reply message (TimeoutError when none comes)."""
        return self.reply(self.ask(method, params, omit, **extra))

    def start(self, settings: dict[str, Any] | None = None) -> None:
        params = default_converter().unstructure(init_params(settings={**FAST, **(settings or {})}))
        assert "result" in self.request("initialize", params)
        self.notify("initialized", {})
        self.wait_loaded()

    def complete(self, uri: str, line: int, character: int) -> Any:
        return self.request("textDocument/inlineCompletion", inline(uri, line, character))

    def close(self) -> None:
        self.kill()


def inline(uri: str, line: int, character: int) -> dict[str, Any]:
    return {
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 1},
    }


def selection(line: int, start: int, end: int) -> dict[str, Any]:
    return {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}}


@pytest.fixture(scope="module")
def server() -> Iterator[Raw]:
    raw = Raw()
    try:
        raw.start()
        raw.open(URI, SOURCE)
        yield raw
    finally:
        print(f"\njunk scenarios (cases, crashes, unanswered): {dict(TALLY)}")
        raw.close()


TALLY: Counter[str] = Counter()


def assert_client_error(reply: dict[str, Any], codes: tuple[int, ...] = CLIENT_ERRORS) -> None:
    error = reply.get("error")
    assert error is not None, reply
    assert error["code"] in codes, error
    assert len(error["message"]) < 300 and "Traceback" not in error["message"], error
    assert not error.get("data"), error  # no traceback, no internals


FRESH = itertools.count()


def assert_alive(server: Raw) -> None:
    """The server still completes with the model: a hole the builtin model fills (the empty
    body of `mul`), in a document of its own so that no typed-ahead entry answers instead."""
    uri = f"file:///work/alive{next(FRESH)}.py"
    server.open(uri, SOURCE)
    reply = server.complete(uri, 5, 4)
    assert "result" in reply, reply
    items = reply["result"]["items"]
    assert items, reply  # an empty list would pass any check on its items
    for it in items:
        assert it["range"]["start"] == {"line": 5, "character": 4}, it
        assert it["insertText"].strip(), it


# -- the repros from the issue ---------------------------------------------------------------------
MALFORMED = [
    ("textDocument/inlineCompletion", inline(URI, -1, 0)),
    ("textDocument/inlineCompletion", None),
    ("textDocument/inlineCompletion", {**inline(URI, 0, 0), "textDocument": URI}),
    ("textDocument/inlineCompletion", inline(URI, 2**31, 0)),
    ("textDocument/inlineCompletion", inline(URI, 0, 2**40)),
    (
        "textDocument/codeAction",
        {
            "textDocument": {"uri": URI},
            "range": selection(2**31, 0, 1),
            "context": {"diagnostics": []},
        },
    ),
    ("workspace/executeCommand", {"arguments": [URI, selection(0, 0, 3)]}),
    ("workspace/executeCommand", {"command": "dllm.noSuchCommand", "arguments": []}),
    ("workspace/executeCommand", {"command": "dllm.refineSelection", "arguments": [42]}),
    ("workspace/executeCommand", {"command": "dllm.refactorSelection", "arguments": [URI, "x"]}),
    ("workspace/executeCommand", {"command": "dllm.fillFunctionBody", "arguments": [URI, [1]]}),
    ("textDocument/noSuchMethod", {}),
]


@pytest.mark.parametrize(("method", "params"), MALFORMED)
def test_malformed_params_get_an_error_reply(server: Raw, method: str, params: Any) -> None:
    shown = len(server.shown)
    assert_client_error(server.request(method, params))
    assert server.shown[shown:] == []  # no popup for a client's mistake


def test_a_request_without_params_is_answered(server: Raw) -> None:
    reply = server.request("dllm/status", omit=True)
    assert reply["result"]["state"] == "ready"
    assert_client_error(server.request("textDocument/inlineCompletion", omit=True))


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": [7], "method": "dllm/status"},  # an id must be int or str
        {"jsonrpc": "2.0", "id": 8, "method": 12},  # a method must be a string
        {"jsonrpc": "1.0", "id": 9, "method": "dllm/status"},
        ["a", "batch"],
    ],
)
def test_a_malformed_request_object_is_an_invalid_request(server: Raw, message: Any) -> None:
    server.send(message)
    msg_id = message.get("id") if isinstance(message, dict) else None
    reply = server.reply(msg_id if isinstance(msg_id, int) else None, timeout=10)
    assert_client_error(reply, (-32600,))
    assert server.status()["state"] == "ready"


# -- junk params for every method ------------------------------------------------------------------
json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**33), max_value=2**33)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["\ud800", URI, "file:///never/opened.py", "python", ""])
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*here, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, valid: Any) -> Any:
    """valid params with one part replaced by junk or removed, or wholly junk."""
    if draw(st.integers(0, 5)) == 0:
        return draw(json_value)
    value = json.loads(json.dumps(valid))
    path = draw(st.sampled_from(paths(value)))
    if not path:
        return draw(json_value)
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(json_value)
    return value


REQUESTS = {
    "inlineCompletion": ("textDocument/inlineCompletion", inline(URI, 1, 8)),
    "codeAction": (
        "textDocument/codeAction",
        {
            "textDocument": {"uri": URI},
            "range": selection(1, 4, 16),
            "context": {"diagnostics": []},
        },
    ),
    "fillFunctionBody": (
        "workspace/executeCommand",
        {"command": "dllm.fillFunctionBody", "arguments": [URI, {"line": 5, "character": 4}]},
    ),
    "refactorSelection": (
        "workspace/executeCommand",
        {"command": "dllm.refactorSelection", "arguments": [URI, selection(1, 11, 16), "swap"]},
    ),
    "refineSelection": (
        "workspace/executeCommand",
        {"command": "dllm.refineSelection", "arguments": [URI, selection(1, 11, 16)]},
    ),
    "status": ("dllm/status", None),
}
NOTIFICATIONS = {
    "didOpen": (
        "textDocument/didOpen",
        {
            "textDocument": {
                "uri": "file:///other.py",
                "languageId": "python",
                "version": 1,
                "text": "x = 1\n",
            }
        },
    ),
    "didChange": (
        "textDocument/didChange",
        {
            "textDocument": {"uri": URI, "version": 2},
            "contentChanges": [{"range": selection(0, 0, 0), "text": ""}],
        },
    ),
    "didClose": ("textDocument/didClose", {"textDocument": {"uri": "file:///other.py"}}),
    "didChangeConfiguration": ("workspace/didChangeConfiguration", {"settings": {"dllm": {}}}),
}
JUNK_SETTINGS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("name", list(REQUESTS))
def test_junk_request_params_always_get_a_reply(server: Raw, name: str) -> None:
    method, valid = REQUESTS[name]
    shown = len(server.shown)

    @JUNK_SETTINGS
    @given(params=mutated(valid))
    def junk(params: Any) -> None:
        TALLY[f"{name} cases"] += 1
        try:
            reply = server.request(method, params)
        except TimeoutError:
            TALLY[f"{name} unanswered"] += 1
            raise
        if "error" in reply:
            TALLY[f"{name} crashes"] += reply["error"]["code"] not in CLIENT_ERRORS
            assert_client_error(reply)

    junk()
    assert [m for m in server.shown[shown:] if "Error in server" in m or "nvalid" in m] == []
    server.open(URI, SOURCE)  # a junk command may have edited or a junk didClose closed it
    assert_alive(server)


@pytest.mark.parametrize("name", list(NOTIFICATIONS))
def test_junk_notifications_leave_the_server_serving(server: Raw, name: str) -> None:
    method, valid = NOTIFICATIONS[name]
    before = server.status()["settings"]
    shown = len(server.shown)

    @JUNK_SETTINGS
    @given(params=mutated(valid))
    def junk(params: Any) -> None:
        TALLY[f"{name} cases"] += 1
        server.notify(method, params)
        try:
            server.status()
        except TimeoutError:
            TALLY[f"{name} unanswered"] += 1
            raise

    junk()
    popups = server.shown[shown:]
    if name == "didChangeConfiguration":  # invalid settings are the user's to see, by design
        popups = [m for m in popups if "setting" not in m]
    assert popups == []
    server.notify("workspace/didChangeConfiguration", {"settings": before})
    server.open(URI, SOURCE)
    assert server.status()["state"] == "ready"
    assert_alive(server)


# -- a lone surrogate in the document --------------------------------------------------------------
LONE = "def tag(x):\n    s = 'a\ud800b'\n    return s + x\n"


def no_surrogates(text: str) -> bool:
    return not any(0xD800 <= ord(c) < 0xE000 for c in text)


def test_a_lone_surrogate_in_the_document_is_served(server: Raw) -> None:
    """Positions right of a lone surrogate (one UTF-16 unit) hold: on its own line and below,
    completions start at the cursor and edits replace exactly the selection."""
    uri = "file:///work/lone.py"
    server.open(uri, LONE)
    for line, character in ((1, 12), (2, 16)):  # before the closing quote; the end of `return`
        reply = server.complete(uri, line, character)
        assert "result" in reply, reply
        items = reply["result"]["items"]
        assert items, reply  # the builtin model fills both holes
        for it in items:
            assert it["range"]["start"] == {"line": line, "character": character}, it
            assert no_surrogates(it["insertText"]), it
    edits_before = len(server.edits)
    applied = []
    for name in ("refineSelection", "refactorSelection"):
        args = [uri, selection(2, 11, 16)]
        reply = server.request(
            "workspace/executeCommand", {"command": f"dllm.{name}", "arguments": args}
        )
        assert "result" in reply, reply
        if reply["result"]["applied"]:
            applied.append(reply["result"]["text"])
    assert applied, "neither command edited: nothing here checks their positions"
    edits = [
        e
        for request in server.edits[edits_before:]
        for change in request["edit"]["documentChanges"]
        if change["textDocument"]["uri"] == uri
        for e in change["edits"]
    ]
    assert [e["newText"] for e in edits] == applied  # one edit per applied command, in order
    for e in edits:
        assert e["range"] == selection(2, 11, 16), e  # exactly the selection, right of it
        assert no_surrogates(e["newText"]), e
    s = server.status()
    assert s["state"] == "ready" and s["last"]["stop_reason"] is not None


# -- exit ------------------------------------------------------------------------------------------
def test_exit_without_shutdown_during_a_request_is_quick_quiet_and_1() -> None:
    """`exit` while the engine decodes a fill of 300 passes (seconds): the process ends at
    once with 1, without the fill's answer (it did not wait for it) and without a traceback."""
    raw = Raw()
    try:
        raw.start(SLOW)
        raw.open(URI, SOURCE)
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": "slow",
                "method": "textDocument/inlineCompletion",
                "params": inline(URI, 5, 4),
            }
        )
        deadline = time.monotonic() + 30
        while (s := raw.status())["requests"] == 0:  # until the model call has started
            assert time.monotonic() < deadline, "the completion never reached the engine"
        assert s["model_calls"] == 0  # ... and has not ended
        before = len(raw.stderr)
        raw.notify("exit", None)
        code = raw.proc.wait(timeout=30)
    finally:
        raw.close()  # reads stderr to its end
    noise = len(raw.stderr) - before
    assert code == 1  # no shutdown came first
    box = raw.replies.get(json.dumps("slow"))
    assert box is None or box.empty()  # gone before the fill could answer
    assert noise < 2000, bytes(raw.stderr[before:][:2000])


def test_exit_after_shutdown_is_0() -> None:
    raw = Raw()
    try:
        params = default_converter().unstructure(init_params())
        assert "result" in raw.request("initialize", params)
        assert raw.request("shutdown", None)["result"] is None
        late = raw.request("dllm/status", None)  # after shutdown: an error, still an answer
        assert_client_error(late, (-32600,))
        raw.notify("exit", None)
        code = raw.proc.wait(timeout=30)
    finally:
        raw.close()
    assert code == 0


def test_exit_while_the_model_loads_ends_the_process_at_once() -> None:
    """The model loads on a daemon thread (lsp_server/engines/daemon.py): `shutdown` and `exit` sent
    while it loads end the process without waiting for the load; on the pool thread
    asyncio.to_thread uses, the interpreter waited for it (2.9 s on 2 cores, the exit 0.03 s
    now). No fixed bound: the exit is compared with a load of the same model timed in this run,
    on this machine as loaded as it is now."""
    raw = Raw()
    try:
        params = default_converter().unstructure(init_params())
        assert "result" in raw.request("initialize", params)
        raw.notify("initialized", {})
        deadline = time.monotonic() + 30
        while raw.status()["state"] != "loading":
            assert time.monotonic() < deadline, "the model load never started"
        assert raw.request("shutdown", None)["result"] is None
        t0 = time.monotonic()
        raw.notify("exit", None)
        code = raw.proc.wait(timeout=30)
        took = time.monotonic() - t0
    finally:
        raw.close()
    assert code == 0
    # the load the server was in (torch's import included), timed in a process of its own:
    # in this one, an earlier test's load may be cached
    timer = (
        "import time; t = time.monotonic(); from infill_engine import load; "
        "load('builtin', device='cpu'); print(time.monotonic() - t)"
    )
    load_s = float(subprocess.run([sys.executable, "-c", timer], capture_output=True,
                                  text=True, check=True, timeout=120).stdout)  # fmt: skip
    assert took < load_s / 3, f"exit took {took:.2f} s, a load {load_s:.2f} s"


def test_document_text_is_never_logged_above_debug() -> None:
    """At INFO the log says what happens, never what the user wrote: pygls logs every message
    in full at INFO (a completion item carries the rest of the cursor's line); it speaks only
    at DEBUG here."""
    marker = "zq_secret_marker_42"
    raw = Raw([*SERVER[:-1], "INFO"])
    try:
        raw.start()
        raw.open(
            URI, SOURCE.replace("def mul(a, b):\n    \n", f"def mul(a, b):\n      # {marker}\n")
        )
        reply = raw.complete(URI, 5, 4)
        assert reply["result"]["items"], reply  # the reply itself carries the marker
        assert marker in json.dumps(reply)
        raw.request("shutdown")
    finally:
        raw.close()
    log = raw.stderr.decode(errors="replace")
    assert "INFO" in log  # the level took effect: something was logged
    assert marker not in log
