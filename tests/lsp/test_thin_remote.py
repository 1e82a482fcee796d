"""The language server as a thin client of the engine service (`engineAddress`): the real
server over stdio, run under an audit hook that records every file it opens and every module it
imports (tests/tools/audited_ls.py), against a real service in this process with the builtin
model. The `model` setting names a directory that does not exist: the server must not need it.

Each hole is one `v2/infill`: the service plans the span, cuts and tokenizes the context; the
server reads no model file and never imports torch (`dllm/status` says `torch_loaded`), over a
Unix socket and over the HTTP front. The same audit run in-process shows what it would have
seen. And the window of a document that goes with a request (window.py) is checked on its own.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from lsp_client import GREET, SLOW, StdioPeer, init_params
from pygls.protocol import default_converter

from infill_engine import Engine, load
from infill_engine.loader import BUILTIN_DIR
from infill_engine.planner import WINDOW
from infill_engine.scheduler import Scheduler
from infill_engine.service import Address, Service, ServiceThread, parse_address
from lsp_server.engines.window import SIDE_MIN, window

AUDITED = [
    sys.executable,
    str(ROOT / "tests" / "tools" / "audited_ls.py"),
    "--log-level",
    "WARNING",
]
MISSING = "/nonexistent/dllm-model"  # the `model` setting: no such directory
MODEL_FILES = {
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "training_meta.json",
}
HEAVY = ("torch", "transformers", "tokenizers", "safetensors")  # what reads a model's files
TOKEN = "thin-token"
URI = "file:///work/thin.py"
FAST = {"decode": {"maxSpan": 16}, "candidates": 2}


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


class Server(StdioPeer):
    """The audited server on stdio; `audit` is what it read and imported so far."""

    def __init__(self, log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("DLLM_AUDIT", str(log))
        self.log = log
        super().__init__(AUDITED)

    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        return self.reply(self.ask(method, params), timeout=120)

    def start(self, settings: dict[str, Any]) -> dict[str, Any]:
        params = default_converter().unstructure(init_params(settings=settings))
        assert "result" in self.request("initialize", params)
        self.notify("initialized", {})
        return self.wait_loaded()

    def complete(self, uri: str, line: int, character: int) -> list[str]:
        return [item["insertText"] for item in self.items(uri, line, character)]

    def model_fills(self, uri: str, line: int, character: int) -> list[str]:
        """The items that are the model's fills (not a draft from the document or workspace)."""
        items = self.items(uri, line, character)
        return [i["insertText"] for i in items if i["command"]["arguments"][0]["source"] == "model"]

    def items(self, uri: str, line: int, character: int) -> list[dict[str, Any]]:
        position = {"line": line, "character": character}
        params = {"textDocument": {"uri": uri}, "position": position, "context": {"triggerKind": 1}}
        reply = self.request("textDocument/inlineCompletion", params)
        return list(reply["result"]["items"])

    def audit(self) -> tuple[list[str], set[str]]:
        """(paths opened or listed, top-level packages imported)."""
        events = [json.loads(line) for line in self.log.read_text().splitlines()]
        paths = [e["path"] for e in events if "path" in e]
        modules = {e["module"].split(".")[0] for e in events if "module" in e}
        return paths, modules


def model_reads(paths: list[str]) -> list[str]:
    """The paths that are a model's: under the builtin model, the `model` setting, or named
    like a model directory's files."""
    return [
        p
        for p in paths
        if p.startswith(str(BUILTIN_DIR)) or p.startswith(MISSING) or Path(p).name in MODEL_FILES
    ]


def service_at(engine: Engine, address: Address, token: str | None = None) -> ServiceThread:
    thread = ServiceThread(
        Service(engine, "builtin", token, scheduler=Scheduler(engine.live_batch, max_batch=8)),
        address,
    )
    thread.start()
    return thread


def test_a_thin_server_completes_through_the_service_and_reads_no_model_file(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = service_at(engine, Address("unix", path=str(tmp_path / "s.sock")))
    scheduler = service.service.scheduler
    server = Server(tmp_path / "audit.jsonl", monkeypatch)
    try:
        address = f"unix:{tmp_path / 's.sock'}"
        s = server.start({**FAST, "engineAddress": address, "model": MISSING})
        assert s["state"] == "ready", s["error"]
        assert s["engine_address"] == address and s["service_model"] == "builtin"
        assert s["model"] == MISSING and s["torch_loaded"] is False
        server.open(URI, GREET)
        items = server.complete(URI, 2, 4)
        assert items and all(t.strip() for t in items)
        assert scheduler.stats()["done"] >= 1 and server.status()["model_calls"] == 1

        # a command: the service plans the empty body and cuts its context
        done = scheduler.stats()["done"]
        args = [URI, {"line": 2, "character": 4}]
        reply = server.request(
            "workspace/executeCommand", {"command": "dllm.fillFunctionBody", "arguments": args}
        )
        assert "result" in reply and scheduler.stats()["done"] == done + 1
        assert server.status()["last"]["kind"] in ("statement", "function_body", "block_body")
        selection = {"start": {"line": 5, "character": 0}, "end": {"line": 5, "character": 21}}
        reply = server.request(
            "workspace/executeCommand",
            {"command": "dllm.refactorSelection", "arguments": [URI, selection, "say hi"]},
        )
        assert "result" in reply and scheduler.stats()["done"] == done + 2
        assert server.status()["last"]["kind"] == "selection"  # planned with `end`

        # a document over the service's 1 MiB frame: a window of it goes, and the fill comes back
        filler = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(16_000))
        big = filler + GREET + filler
        assert len(big.encode()) > 1 << 20 and len(big) < 2_000_000  # context.maxDocumentChars
        server.open("file:///work/big.py", big, version=1)
        calls = server.status()["model_calls"]
        fills = server.model_fills("file:///work/big.py", filler.count("\n") + 2, 4)
        assert fills and all(t.strip() for t in fills), server.errors  # the model's, not a draft
        s = server.status()
        assert s["model_calls"] == calls + 1, server.errors  # not refused as too large
        assert s["torch_loaded"] is False and s["state"] == "ready"
    finally:
        server.kill()
        service.stop()
    paths, modules = server.audit()
    assert any(p.endswith("lsp_server/engines/window.py") for p in paths)  # the audit sees it
    assert model_reads(paths) == []
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_the_audit_sees_an_in_process_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the thin server's audit would show had it loaded the model: the builtin model's
    files, torch and the tokenizer."""
    server = Server(tmp_path / "audit.jsonl", monkeypatch)
    try:
        s = server.start({"model": "builtin", "device": "cpu"})
        assert s["state"] == "ready" and s["torch_loaded"] is True
    finally:
        server.kill()
    paths, modules = server.audit()
    read = {Path(p).name for p in model_reads(paths)}
    assert {"config.json", "tokenizer_config.json"} <= read, read
    assert {"torch", "tokenizers", "safetensors"} <= modules


def test_a_thin_server_over_the_http_front(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = service_at(engine, parse_address("http://127.0.0.1:0"), TOKEN)
    assert service.bound is not None
    address = f"http://127.0.0.1:{service.bound.port}"
    scheduler = service.service.scheduler
    wrong = Server(tmp_path / "wrong.jsonl", monkeypatch)
    server = Server(tmp_path / "audit.jsonl", monkeypatch)
    try:
        s = wrong.start({"engineAddress": address, "engineToken": "not-it", "model": MISSING})
        assert s["state"] == "failed" and "unauthorized" in s["error"]
        assert "engineToken" in s["error"]

        settings = {**FAST, "engineAddress": address, "engineToken": TOKEN, "model": MISSING}
        s = server.start(settings)
        assert s["state"] == "ready", s["error"]
        assert s["service_model"] == "builtin" and s["torch_loaded"] is False
        assert s["settings"]["engineToken"] == "(set)"  # never the secret itself
        server.open(URI, GREET)
        items = server.complete(URI, 2, 4)
        assert items and all(t.strip() for t in items)
        assert scheduler.stats()["done"] >= 1

        # refine over HTTP: POST /v2/refine, its re-prediction a row of the service's batch
        done = scheduler.stats()["done"]
        selection = {"start": {"line": 5, "character": 6}, "end": {"line": 5, "character": 11}}
        reply = server.request(
            "workspace/executeCommand",
            {"command": "dllm.refineSelection", "arguments": [URI, selection]},
        )
        assert reply.get("result", {}).get("applied") is True, (reply, server.shown)
        assert scheduler.stats()["done"] == done + 1

        # the editor cancels a long fill: the request is dropped, the service cancels its row
        server.notify("workspace/didChangeConfiguration", {"settings": SLOW})
        server.open("file:///work/slow.py", GREET)
        position = {"line": 2, "character": 4}
        params = {
            "textDocument": {"uri": "file:///work/slow.py"},
            "position": position,
            "context": {"triggerKind": 1},
        }
        rid = server.ask("textDocument/inlineCompletion", params)
        deadline = time.monotonic() + 60
        while scheduler.stats()["running"] == 0:
            assert time.monotonic() < deadline, "the slow fill never started"
            time.sleep(0.01)
        server.notify("$/cancelRequest", {"id": rid})
        assert server.reply(rid)["error"]["code"] == -32800  # RequestCancelled
        while scheduler.stats()["cancelled"] == 0:
            assert time.monotonic() < deadline, "the service did not cancel the row"
            time.sleep(0.01)
        assert service.service.counters.disconnect_cancels >= 1
    finally:
        wrong.kill()
        server.kill()
        service.stop()
    paths, modules = server.audit()
    assert model_reads(paths) == []
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


# -- the window (window.py) ------------------------------------------------------------------------
def test_a_small_document_goes_whole() -> None:
    text = GREET * 10
    assert window(text, 100, 100, 1024, 512, "python") == (0, len(text))


def test_a_window_covers_the_budgets_and_the_planners_reach_at_line_boundaries() -> None:
    text = "".join(f"x_{i} = {i}\n" for i in range(60_000))
    offset = len(text) // 2 + 3  # mid-line
    lo, hi = window(text, offset, offset, 1024, 512, "python")
    assert offset - lo >= max(1024 * 8, SIDE_MIN) and hi - offset >= max(512 * 8, SIDE_MIN)
    assert SIDE_MIN >= 2 * WINDOW and lo > 0 and hi < len(text)
    assert text[lo - 1] == "\n" and text[hi - 1] == "\n"  # whole lines
    big_lo, _ = window(text, offset, offset, 32_768, 512, "python")
    assert offset - big_lo >= 32_768 * 8  # a larger budget, a larger window


def test_a_window_never_opens_inside_a_string() -> None:
    """A cut inside a docstring would turn every later string inside out for the service's
    parser; with a grammar the window starts before the string, without one it cannot know."""
    doc = '"""' + "".join(f"doc line {i}\n" for i in range(20_000)) + '"""\n'
    code = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(200))
    text = doc + code + "def g(y):\n    return \n"
    offset = len(text) - 1
    lo, _ = window(text, offset, offset, 1024, 512, "python")
    assert lo == 0  # the docstring's start
    plain_lo, _ = window(text, offset, offset, 1024, 512, "plaintext")
    assert 0 < plain_lo < len(doc)  # no grammar: a line start inside the docstring


def test_a_window_over_the_frame_shrinks_to_fit() -> None:
    text = "".join(f"s_{i} = '{'é' * 40}'\n" for i in range(40_000))  # 2-byte characters
    offset = len(text) // 2
    lo, hi = window(text, offset, offset, 32_768, 32_768, "python", max_bytes=200_000)
    assert len(text[lo:hi].encode()) <= 200_000 and lo < offset < hi
