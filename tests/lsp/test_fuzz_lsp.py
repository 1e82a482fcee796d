"""Fuzzing the language server's commands and settings: `parse_options` in-process with every key
and every type, then the real server over stdio (raw JSON-RPC: pytest-lsp's client checks what
it sends, and these messages must not pass its checks) with `workspace/executeCommand`
arguments, `workspace/didChangeConfiguration` and `initializationOptions`. After every stdio case
the server must answer `dllm/status` and an inline completion within BOUND_S; every request gets
a result or a client error (-32602 / -32600 / -32601), never -32603 or silence. The figures are
printed by the last test."""

from __future__ import annotations

import json
import math
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from lsp_client import StdioPeer, init_params
from pygls.protocol import default_converter

from infill_engine.request import candidate_spans
from lsp_server.options import (
    _SECRET,
    MAX_UNKNOWN_TOLD,
    SCHEMA,
    Options,
    decode_params,
    describe,
    fit_model,
    parse_options,
)
from lsp_server.protocol.handlers import FILL_BODY, REFACTOR, REFINE, RELOAD_QUIET_S

BOUND_S = 10.0  # the longest a good request may wait for its answer
LOAD_S = 120.0  # a fresh server's model load
URI = "file:///work/fuzz.py"
SOURCE = (
    'def greet(name):\n    """Return a greeting for name."""\n    \n\n\n'
    "def add(a, b):\n    return a + b\n\n\nprint(greet('world'))\n"
)
HOLE = (2, 4)  # the empty body line: the builtin model completes there
FAST = {"decode": {"maxSpan": 8, "span": 8}, "candidates": 1, "debounceMs": 0}
SNOOZE, ACCEPTED = "dllm.snooze", "dllm.accepted"
EDIT_ACCEPTED = "dllm.nextEditAccepted"
COMMANDS = (FILL_BODY, REFACTOR, REFINE, SNOOZE, ACCEPTED, EDIT_ACCEPTED)
CLIENT_ERRORS = (-32602, -32600, -32601)
FIGURES: Counter[str] = Counter()
STARTED = time.monotonic()
STDIO = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- strategies (JSON values: what an editor can send) --------------------------------------------
BIG = [-1, 0, 1, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63, 2**64, -(2**63), 10**400, -(10**400)]
ints = st.one_of(st.integers(-3, 600), st.sampled_from(BIG))
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 5e-324, 0.5, 1.0, 1e308]),
)
strings = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "auto", "builtin", "\ud800", "x" * 5000, "<|mask|>", "null"]),
)
scalars = st.one_of(st.none(), st.booleans(), ints, floats, strings)
anything = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                   max_size=4),
    max_leaves=12,
)  # fmt: skip

# Each setting's own domain (valid values and their edges), mixed with anything below. Engine
# settings stay loadable or fail at once: no hub downloads, no remote hosts.
SETTING_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "model": st.sampled_from(["builtin", "", "/nonexistent/model", "org/not-cached"]),
    "device": st.sampled_from(["cpu", "auto", "", "cuda:99", "nonsense"]),
    "dtype": st.sampled_from(["auto", "float32", "bfloat16", "", "int3"]),
    "engineAddress": st.sampled_from(
        [None, "", "unix:/nonexistent/dllm.sock", "tcp://127.0.0.1:1", "tcp:[::1]:1", "tcp://x"]
    ),
    "engineToken": st.one_of(st.none(), st.text(max_size=20)),
    "quantize": st.sampled_from(["none", "int8", "int4", "int3", ""]),
    "engineModel": st.one_of(st.none(), st.text(max_size=20)),
    "engineApiKeyEnv": st.sampled_from(["DLLM_API_KEY", "MY_KEY", "", "1BAD", "A-B"]),
    "decode.policy": st.sampled_from(["threshold", "factor", "fixed", "beam"]),
    "decode.threshold": st.one_of(st.none(), st.floats(-0.5, 1.5)),
    "decode.blockSize": st.integers(0, 520),
    "decode.maxSpan": st.integers(0, 520),
    "decode.span": st.one_of(st.none(), st.just("auto"), st.integers(0, 520)),
    "decode.minTokens": st.integers(-1, 520),
    "decode.cache": st.sampled_from(["dual", "prefix", "none", "paged"]),
    "decode.speculate": st.sampled_from(["off", "exact", "fast", "always"]),
    "decode.lookahead": st.integers(-1, 20),
    "context.prefixTokens": st.integers(-1, 40000),
    "context.suffixTokens": st.integers(-1, 40000),
    "context.maxDocumentChars": st.integers(0, 1 << 31),
    "context.crossFile": st.one_of(st.booleans(), st.none(), st.just("yes")),
    "context.crossFileTokens": st.integers(-1, 40000),
    "stats.enabled": st.one_of(st.booleans(), st.none(), st.just(1)),
    "stats.slowMs": st.one_of(st.integers(-1, 70_000), st.floats(-1, 1e9)),
    "debounceMs": st.one_of(st.integers(-1, 2000), st.floats(-1, 70_000)),
    "candidates": st.integers(0, 9),
    "languages": st.lists(st.sampled_from(["python", "rust", "", "javascript", "*"]), max_size=3),
    "modelLanguages": st.one_of(
        st.none(), st.lists(st.sampled_from(["python", "go", ""]), max_size=2)
    ),
    "drafts.enabled": st.one_of(st.booleans(), st.none(), st.just(1)),
    "drafts.gate": st.one_of(st.none(), st.floats(-2, 2)),
    "drafts.trustModel": st.one_of(st.booleans(), st.none(), st.just("yes")),
    "drafts.workspace": st.one_of(st.booleans(), st.none()),
    "drafts.maxFileBytes": st.integers(0, 1 << 27),
    "drafts.maxFiles": st.integers(-1, 2_000_000),
    "drafts.maxBytes": st.integers(-1, 1 << 33),
    "drafts.maxSeconds": st.one_of(st.floats(-1, 10_000), st.just("30")),
    "drafts.exclude": st.one_of(st.lists(st.text(max_size=8), max_size=3), st.just("*.py")),
    "nextEdits.enabled": st.one_of(st.booleans(), st.none(), st.just(1)),
    "nextEdits.gate": st.one_of(st.none(), st.floats(-2, 2)),
    "nextEdits.model": st.one_of(st.booleans(), st.none(), st.just("yes")),
    "nextEdits.hostedAddress": st.sampled_from(
        [None, "", "mercury+https://127.0.0.1:1/v1", "mercury+ftp://x", "openai+https://x/v1"]
    ),
    "nextEdits.maxLatencyMs": st.one_of(st.integers(-1, 70_000), st.just(300.5)),
    "token": st.one_of(st.none(), st.text(max_size=20)),
    "serverPath": strings,
}
assert set(SETTING_VALUES) == {key for _, _, key, _ in SCHEMA} | {"token", "serverPath"}
ENGINE_KEYS = ("model", "device", "dtype", "engineAddress", "engineToken")


def chance(draw: st.DrawFn, n: int) -> bool:
    """True about one time in n. The rare branch is a middle draw: hypothesis starts from, and
    shrinks to, the lowest value and favours both ends, which would make it the common case."""
    return bool(draw(st.integers(1, n)) == (n + 1) // 2)


def nest(flat: dict[str, Any], dotted: bool) -> dict[str, Any]:
    """Dotted keys as they are, or nested objects (`decode.policy` -> {"decode": {"policy"}})."""
    if dotted:
        return dict(flat)
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *path, leaf = key.split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[leaf] = value
    return out


@st.composite
def settings_objects(draw: st.DrawFn, engine: bool = True, junk: bool = True) -> Any:
    """A settings object as an editor may send it: some keys, each valid or of any type, dotted
    or nested, maybe inside {"dllm": ...}, maybe with unknown keys; or not an object at all."""
    if junk and chance(draw, 16):
        return draw(anything)
    flat: dict[str, Any] = {}
    for key, valid in SETTING_VALUES.items():
        if key in ENGINE_KEYS and not engine:
            continue
        if draw(st.integers(0, 3)) == 0:
            flat[key] = draw(st.one_of(valid, valid, anything) if junk else valid)
    if junk and chance(draw, 5):
        flat.update(draw(st.dictionaries(st.text(min_size=1, max_size=20), anything, max_size=3)))
    if junk and chance(draw, 12):  # another tool's settings, sent whole; a key of a page
        flat.update({f"other.tool{i}": i for i in range(draw(st.integers(10, 2000)))})
        flat["k" * 5000] = 1
    obj = nest(flat, draw(st.booleans()))
    return {"dllm": obj} if draw(st.booleans()) else obj


# -- settings in-process --------------------------------------------------------------------------
def check_options(opts: Options) -> None:
    """Settings that hold: each value passes its own check (so `describe` reads back as the same
    settings), describes as strict JSON, and makes valid engine params for every span."""
    for section, name, key, check in SCHEMA:
        value = getattr(getattr(opts, section), name)
        if key in _SECRET:
            continue
        assert check(list(value) if isinstance(value, tuple) else value) == value, key
    json.dumps(describe(opts), allow_nan=False)
    json.dumps(describe(opts, nested=True), allow_nan=False)
    again, errors = parse_options(
        {k: v for k, v in describe(opts).items() if k not in _SECRET}, base=opts
    )
    assert errors == [] and again == opts
    decode = fit_model(opts, 384)[0].decode
    for floor in {0, 4, decode.max_span}:
        p = decode_params(decode, floor)  # raises on an invalid combination
        base = p.span if isinstance(p.span, int) else 1  # "auto": the planner's, at least 1
        for s in candidate_spans(base, p.max_span, 3):  # each fill's params, as the engine's
            replace(p, span=s, max_span=max(s, p.max_span), min_tokens=min(s, p.min_tokens))


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(settings_objects(), st.one_of(st.none(), settings_objects(junk=False)))
def test_parse_options_takes_any_settings(raw: Any, base_raw: Any) -> None:
    FIGURES["parse_options cases"] += 1
    base = parse_options(base_raw)[0] if base_raw is not None else None
    try:
        opts, errors = parse_options(raw, base=base)
    except Exception:
        FIGURES["parse_options crashes"] += 1
        raise
    check_options(opts)
    assert all(isinstance(e, str) and len(e) <= 500 for e in errors), errors
    assert len(errors) <= MAX_UNKNOWN_TOLD + 1 + len(SCHEMA), errors
    section = raw["dllm"] if isinstance(raw, dict) and isinstance(raw.get("dllm"), dict) else raw
    if not isinstance(section, dict) or not section:
        assert opts == (base or Options())  # nothing to take
    # keys the settings do not name keep their value
    named = json.dumps(section)
    for s, name, key, _ in SCHEMA:
        if f'"{key}"' not in named and f'"{key.split(".")[-1]}"' not in named:
            assert getattr(getattr(opts, s), name) == getattr(getattr(base or Options(), s), name)


@pytest.mark.parametrize("key", [key for _, _, key, _ in SCHEMA])
@pytest.mark.parametrize(
    "value",
    [10**400, -(10**400), 2**64, math.nan, -math.inf, True, [1]],
    ids=["400 digits", "-400 digits", "2**64", "nan", "-inf", "true", "list"],
)
def test_a_setting_of_any_number_is_a_message_and_a_default(key: str, value: Any) -> None:
    """A JSON integer too large for a float (a 400-digit literal is valid JSON) raised
    OverflowError out of parse_options: initialize failed, a settings change popped up an error
    and dropped the rest of the change."""
    check = next(c for _, _, k, c in SCHEMA if k == key)
    if value is True and _accepts(check, True):  # a switch: true is its value, and no message
        opts, errors = parse_options({key: value})
        assert not any(key in e for e in errors), errors
        return
    other = "context.prefixTokens" if key == "candidates" else "candidates"
    opts, errors = parse_options({key: value, other: 7})
    assert 7 in (opts.completion.candidates, opts.context.prefix_tokens)  # the rest applies
    check_options(opts)
    assert any(key in e for e in errors), errors


def _accepts(check: Any, value: Any) -> bool:
    try:
        check(value)
    except ValueError:
        return False
    return True


def test_unknown_settings_are_few_short_messages() -> None:
    """A client that sends every tool's settings (the object has no `dllm` section) got one
    popup per leaf, each naming its key in full."""
    raw = {"rust-analyzer": {f"opt{i}": i for i in range(500)}, "x" * 5000: 1, "candidates": 2}
    opts, errors = parse_options(raw)
    assert opts.completion.candidates == 2
    assert len(errors) == MAX_UNKNOWN_TOLD + 1 and "493 more unknown settings" in errors[-1]
    assert "rust-analyzer.opt0" in errors[0] and max(map(len, errors)) < 200


# -- the real server over stdio -------------------------------------------------------------------
class Peer(StdioPeer):
    """The server on stdio, every request bounded in time and its stalls and crashes counted."""

    def __init__(self) -> None:
        super().__init__()
        self.init_result: dict[str, Any] = {}

    def request(self, method: str, params: Any, timeout: float = BOUND_S) -> dict[str, Any]:
        msg_id = self.ask(method, params)
        try:
            return self.reply(msg_id, timeout)
        except TimeoutError:
            FIGURES["stalls"] += 1
            code = self.proc.poll()
            if code is not None:
                FIGURES["crashes"] += 1
                raise AssertionError(f"the server exited ({code}) on {method}") from None
            raise AssertionError(f"no reply to {method} in {timeout} s") from None

    def start(self, settings: Any) -> None:
        params = default_converter().unstructure(init_params())
        params["initializationOptions"] = settings
        reply = self.request("initialize", params, timeout=LOAD_S)
        assert "result" in reply, reply  # bad settings are messages, never a failed initialize
        self.init_result = reply["result"]
        self.notify("initialized", {})
        self.open(URI, SOURCE)
        self.wait_loaded(LOAD_S)

    def complete(self) -> list[dict[str, Any]]:
        params = {
            "textDocument": {"uri": URI},
            "position": {"line": HOLE[0], "character": HOLE[1]},
            "context": {"triggerKind": 1},
        }
        reply = self.request("textDocument/inlineCompletion", params)
        assert "result" in reply, reply
        return list(reply["result"]["items"])

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"})
            self.notify("exit", None)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def check_alive(peer: Peer, items: bool = True) -> None:
    """The good requests: status, and an inline completion at the hole (with items when the
    settings are the fast ones)."""
    s = peer.status()
    check_options(parse_options(s["settings"])[0])  # what the server says it uses holds
    got = peer.complete()
    assert got or not items, "no completion at the hole"
    if items:
        assert s["state"] == "ready", s


def not_ours(errors: list[str]) -> bool:
    """Error popups are only a model that cannot load or an engine service out of reach (the
    user's settings): any other is a failure of ours."""
    return all(m.startswith(("dLLM: cannot load model", "dLLM: engine service")) for m in errors)


def check_reply(reply: dict[str, Any]) -> None:
    FIGURES["replies"] += 1
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        error = reply["error"]
        FIGURES[f"error {error['code']}"] += 1
        FIGURES[f"msg {error['message'][:60]}"] += 1
        assert error["code"] in CLIENT_ERRORS, error  # -32603 is a bug of ours
        assert len(error["message"]) < 300 and not error.get("data"), error


@pytest.fixture(scope="module")
def peer() -> Iterator[Peer]:
    p = Peer()
    try:
        p.start(FAST)
        check_alive(p)
        FIGURES["server_rss_before_kib"] = p.rss_kib()
        yield p
    finally:
        FIGURES["server_rss_after_kib"] = p.rss_kib() if p.proc.poll() is None else 0
        p.close()


def position_of(line: Any, character: Any) -> Any:
    return {"line": line, "character": character}


def one_in(n: int, odd: st.SearchStrategy[Any], usual: st.SearchStrategy[Any]) -> Any:
    """`odd` about one time in n, else `usual` (one_of would draw each as often)."""
    mid = (n + 1) // 2  # not an end: hypothesis favours those (see chance)
    return st.tuples(st.integers(1, n), odd, usual).map(lambda t: t[1] if t[0] == mid else t[2])


coord = one_in(10, st.one_of(ints, floats, strings, st.none()), st.integers(0, 12))
position = one_in(8, anything, st.builds(position_of, coord, coord))
rng = one_in(8, anything, st.fixed_dictionaries({"start": position, "end": position}))
uri = one_in(4, st.one_of(st.just("file:///never/opened.py"), strings), st.just(URI))
instruction = st.one_of(
    st.text(max_size=40), st.sampled_from(["x" * 20_000, "# \n\n", "<|mask|>" * 50]), anything
)


@st.composite
def command_arguments(draw: st.DrawFn, command: str) -> Any:
    """[uri, position-or-range, instruction?] with any of them odd, or any JSON at all."""
    pick = draw(st.integers(1, 10))
    if pick == 10:
        return draw(anything)  # not a list, or a list of anything
    if pick == 9:
        return draw(strings)  # a string is not a list of characters
    if command == SNOOZE:  # [minutes]
        return [draw(st.one_of(ints, floats, strings, st.none()))][: draw(st.integers(0, 1))]
    if command == ACCEPTED:  # [{id, languageId}]
        item = {"id": draw(st.one_of(strings, ints)), "languageId": draw(strings)}
        return [draw(st.one_of(st.just(item), anything))]
    if command == EDIT_ACCEPTED:  # [id]
        return [draw(st.one_of(strings, ints, anything))]
    where = draw(position if command == FILL_BODY else rng)
    args = [draw(uri), where]
    if draw(st.booleans()):
        args.append(draw(instruction))
    if chance(draw, 6):
        args += draw(st.lists(anything, max_size=3))
    return args[: draw(st.integers(0, len(args)))] if chance(draw, 7) else args


@st.composite
def execute_command(draw: st.DrawFn) -> Any:
    command = draw(one_in(5, st.one_of(strings, anything), st.sampled_from(COMMANDS)))
    params: dict[str, Any] = {"command": command}
    if not chance(draw, 10):
        params["arguments"] = draw(command_arguments(command if command in COMMANDS else REFINE))
    if chance(draw, 10):
        params["workDoneToken"] = draw(anything)
    return params


@settings(STDIO, max_examples=80)
@given(execute_command())
@example({"command": REFINE, "arguments": URI})  # a string is not a list of characters
@example({"command": FILL_BODY, "arguments": {URI: 1, "x": 2}})
@example({"command": REFACTOR, "arguments": [URI, {"start": position_of(0, 0),
          "end": position_of(1, 0)}, {"text": "an instruction that is not a string"}]})  # fmt: skip
def test_fuzz_execute_command(peer: Peer, params: Any) -> None:
    assert set(peer.init_result["capabilities"]["executeCommandProvider"]["commands"]) == set(
        COMMANDS
    ), "a new command: add it to COMMANDS, and its arguments to command_arguments"
    FIGURES["executeCommand cases"] += 1
    shown, errors = len(peer.shown), len(peer.errors)
    reply = peer.request("workspace/executeCommand", params)
    check_reply(reply)
    args = params.get("arguments")
    if args is not None and not isinstance(args, list):
        assert reply.get("error", {}).get("code") == -32602, reply  # not a list of characters
    elif params["command"] == REFACTOR and args and len(args) > 2 and args[2] is not None:
        instruction_ok = isinstance(args[2], str)
        assert instruction_ok or reply.get("error", {}).get("code") == -32602, reply  # not dropped
    if "error" in reply:
        assert peer.shown[shown:] == [], "a client's mistake is no popup"
    elif params["command"] in (SNOOZE, ACCEPTED, EDIT_ACCEPTED):
        FIGURES[f"executeCommand {params['command']} answered"] += 1
    else:
        assert isinstance(reply["result"], dict), reply
        assert reply["result"]["applied"] in (True, False), reply
        FIGURES[f"executeCommand applied {reply['result']['applied']}"] += 1
    assert peer.errors[errors:] == [], "a command failed inside (an error popup)"
    assert all(len(m) < 1000 for m in peer.shown[shown:]), peer.shown[shown:]
    check_alive(peer)


@settings(STDIO, max_examples=40)
@given(st.one_of(settings_objects(engine=False), settings_objects()))
@example({"dllm": {"debounceMs": 10**400, "candidates": 2}})
@example({"dllm": {"decode": {"threshold": -(10**400)}}})
def test_fuzz_did_change_configuration(peer: Peer, raw: Any) -> None:
    FIGURES["didChangeConfiguration cases"] += 1
    errors, shown = len(peer.errors), len(peer.shown)
    peer.notify("workspace/didChangeConfiguration", {"settings": raw})
    if parse_options(raw, base=parse_options(FAST)[0])[0].engine != Options().engine:
        FIGURES["didChangeConfiguration reloads"] += 1
        time.sleep(RELOAD_QUIET_S + 0.1)  # the reload starts once the settings are quiet
        peer.wait_loaded()  # ready, or failed with a message
    check_alive(peer, items=False)
    assert not_ours(peer.errors[errors:])
    assert len(peer.shown) - shown <= MAX_UNKNOWN_TOLD + len(SCHEMA) + 3, "a flood of popups"
    peer.notify("workspace/didChangeConfiguration", {"settings": RESET})


SELECTION = {"start": position_of(6, 11), "end": position_of(6, 16)}  # `a + b`


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"command": REFINE, "arguments": URI}, "arguments must be an array"),
        ({"command": FILL_BODY, "arguments": {URI: position_of(2, 4)}}, "an array"),
        ({"command": 10**400, "arguments": []}, "command must be a string"),
        ({"command": "x" * 5000, "arguments": []}, "no command 'xxx"),
        ({"command": REFACTOR, "arguments": [URI, SELECTION, {"text": "swap"}]}, "instruction"),
    ],
    ids=["a string", "an object", "a number", "a long name", "an object instruction"],
)
def test_command_params_of_the_wrong_shape_are_invalid_params(
    peer: Peer, params: dict[str, Any], says: str
) -> None:
    """A string of arguments was taken for the list of its characters (the command ran on a
    document named "f" and told the user it was not open), an object for its keys, a number
    for the command's name; an unknown name came back whole in the error, and an instruction
    that is not a string was dropped while the selection was rewritten and applied anyway."""
    shown, edits = len(peer.shown), len(peer.edits)
    reply = peer.request("workspace/executeCommand", params)
    assert reply.get("error", {}).get("code") == -32602, reply
    assert says in reply["error"]["message"] and len(reply["error"]["message"]) < 300
    assert peer.shown[shown:] == [] and len(peer.edits) == edits


def test_a_long_uri_is_named_briefly(peer: Peer) -> None:
    shown = len(peer.shown)
    params = {"command": REFINE, "arguments": ["y" * 5000, SELECTION]}
    reply = peer.request("workspace/executeCommand", params)
    assert reply["result"]["applied"] is False and len(reply["result"]["message"]) < 300
    assert len(peer.shown) == shown + 1 and len(peer.shown[-1]) < 300


# Every setting back to the fast ones (a change keeps the keys it does not name).
RESET = {"dllm": describe(parse_options(FAST)[0], nested=True)}


def test_the_server_serves_after_the_settings_fuzz(peer: Peer) -> None:
    time.sleep(0.6)  # past the quiet time of a reload
    s = peer.wait_loaded()
    assert s["state"] == "ready", s
    assert s["settings"]["decode"]["maxSpan"] == 8 and s["model"] == "builtin"
    check_alive(peer)


@settings(STDIO, max_examples=8)
@given(settings_objects())
@example({"debounceMs": 10**400, "decode": {"maxSpan": 8}})
def test_fuzz_initialization_options(raw: Any) -> None:
    """A fresh server for each: initialize is answered, the server loads (or says it failed)
    and serves."""
    FIGURES["initializationOptions cases"] += 1
    p = Peer()
    try:
        p.start(raw)
        FIGURES["replies"] += 1
        s = p.status()
        assert not_ours(p.errors)
        check_alive(p, items=False)
        assert s["state"] == "ready" or s["error"], s
    finally:
        p.close()
        FIGURES["exit codes " + str(p.proc.returncode)] += 1


def test_zz_figures(peer: Peer, capsys: pytest.CaptureFixture[str]) -> None:
    """The module's figures (run last: pytest keeps the file's order)."""
    keys = sorted(k for k in FIGURES if not k.endswith("_kib"))
    before, now = FIGURES["server_rss_before_kib"], peer.rss_kib()
    with capsys.disabled():
        print(f"\nlsp fuzz: {time.monotonic() - STARTED:.1f} s")
        for k in keys:
            print(f"  {k}: {FIGURES[k]}")
        print(f"  server RSS before {before / 1024:.1f} MiB, now {now / 1024:.1f} MiB")
    assert FIGURES["crashes"] == 0 and FIGURES["stalls"] == 0
    assert FIGURES["parse_options crashes"] == 0
    # counted again from what stands now, not from the cases' own failures: the module's server
    # answers the good requests in time, and every fresh server ended with status 0 (the cases
    # only record it)
    hole = {"textDocument": {"uri": URI}, "position": position_of(*HOLE),
            "context": {"triggerKind": 1}}  # fmt: skip
    for method, params in (("dllm/status", None), ("textDocument/inlineCompletion", hole)):
        try:
            reply = peer.request(method, params)  # counts a stall, and a crash if it exited
        except AssertionError:
            continue
        check_reply(reply)
    unclean = {k: n for k, n in FIGURES.items() if k.startswith("exit codes ") and k[11:] != "0"}
    FIGURES["crashes"] += sum(unclean.values())
    assert FIGURES["crashes"] == 0 and FIGURES["stalls"] == 0, unclean
    assert peer.proc.poll() is None
