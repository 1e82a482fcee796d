"""Acceptance counts over LSP, end to end: the real server on stdio with the builtin model. Each
item carries the accept command; `textDocument/didShowCompletion`, the command and
`textDocument/didPartiallyAcceptCompletion` are counted once per item however often they come,
read back through `dllm/status`, written at shutdown to the state file that
`dllm-infill-ls stats` reads; `stats.enabled: false` counts nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsp_client import GREET, StdioPeer, init_params
from pygls.protocol import default_converter

URI = "file:///work/stats.py"
FAST = {"decode": {"maxSpan": 8, "span": 8}, "candidates": 2}


class Peer(StdioPeer):
    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        reply = self.reply(self.ask(method, params))
        assert "result" in reply, reply
        return reply

    def start(self, settings: dict[str, Any] | None = None) -> None:
        params = default_converter().unstructure(init_params(settings={**FAST, **(settings or {})}))
        self.request("initialize", params)
        self.notify("initialized", {})
        assert self.wait_loaded()["state"] == "ready"
        self.open(URI, GREET)

    def items(self) -> list[dict[str, Any]]:
        params = {
            "textDocument": {"uri": URI},
            "position": {"line": 2, "character": 4},
            "context": {"triggerKind": 1},
        }
        result = self.request("textDocument/inlineCompletion", params)["result"]
        items = result["items"] if isinstance(result, dict) else result
        assert items, "the builtin model completes the greeting"
        return list(items)

    def counts(self) -> dict[str, Any]:
        return dict(self.status()["stats"]["languages"].get("python", {}))

    def wait_counts(self, **want: int) -> dict[str, Any]:
        deadline = time.monotonic() + 10
        while {k: (c := self.counts()).get(k) for k in want} != want:
            assert time.monotonic() < deadline, f"{c} is not {want}"
            time.sleep(0.05)
        return c


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    return tmp_path / "dllm-infill" / "stats.json"


@pytest.fixture
def peer(state: Path) -> Iterator[Peer]:
    p = Peer()
    yield p
    p.kill()


def test_shown_accepted_and_partial_are_counted_once(peer: Peer, state: Path) -> None:
    peer.start()
    items = peer.items()
    first, second = items[0], items[1] if len(items) > 1 else None
    command = first["command"]
    assert command["command"] == "dllm.accepted"
    assert command["arguments"][0]["languageId"] == "python"
    for _ in range(3):  # an editor that reports the same item again and again
        peer.notify("textDocument/didShowCompletion", {"item": first})
    for _ in range(2):
        done = peer.request("workspace/executeCommand", command)
    assert done["result"] is None
    peer.notify("textDocument/didPartiallyAcceptCompletion", {"item": first, "acceptedLength": 3})
    peer.notify("textDocument/didPartiallyAcceptCompletion", {"item": first, "acceptedLength": 5})
    # garbage is not counted, and not an error either
    peer.notify("textDocument/didShowCompletion", {"item": {"command": {"arguments": [{}]}}})
    peer.notify("textDocument/didShowCompletion", [1, 2])
    peer.notify("textDocument/didPartiallyAcceptCompletion", {"item": first})
    c = peer.wait_counts(shown=1, accepted=1, partial=1)
    assert c["partial_chars"] == 5 and c["acceptance_rate"] == 1.0
    assert c["requests"] == 1 and c["errors"] == 0 and c["items"] == len(items)
    assert c["p50_ms"] > 0 and c["p95_ms"] >= c["p50_ms"]
    s = peer.status()
    assert s["health"]["state"] == "ok" and s["health"]["recent_requests"] == 1
    assert s["stats"]["file"] == str(state)
    if second is not None:  # another item of the same answer is counted on its own
        peer.notify("textDocument/didShowCompletion", {"item": second})
        peer.wait_counts(shown=2, accepted=1)
    assert peer.request("shutdown")["result"] is None
    peer.notify("exit", None)
    peer.proc.wait(timeout=30)
    saved = json.loads(state.read_text())["languages"]["python"]
    assert saved["accepted"] == 1 and saved["partial"] == 1 and saved["requests"] == 1
    out = subprocess.run(
        [sys.executable, "-m", "lsp_server", "stats", "--json", "--file", str(state)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out)["total"]["accepted"] == 1


def test_counting_off(peer: Peer, state: Path) -> None:
    peer.start({"stats": {"enabled": False}})
    item = peer.items()[0]
    assert "command" not in item or item["command"] is None
    peer.notify("textDocument/didShowCompletion", {"item": item})
    s = peer.status()
    assert s["stats"]["enabled"] is False and s["stats"]["languages"] == {}
    # turned on again by didChangeConfiguration: items carry the command, reports count
    peer.notify(
        "workspace/didChangeConfiguration", {"settings": {"dllm": {"stats": {"enabled": True}}}}
    )
    item = peer.items()[0]
    peer.notify("textDocument/didShowCompletion", {"item": item})
    peer.wait_counts(shown=1, requests=1)
    peer.notify(
        "workspace/didChangeConfiguration", {"settings": {"dllm": {"stats": {"enabled": False}}}}
    )
    peer.request("workspace/executeCommand", item["command"])
    assert peer.counts()["accepted"] == 0
    assert peer.status()["stats"]["file"] is None
    assert peer.request("shutdown")["result"] is None
    peer.notify("exit", None)
    peer.proc.wait(timeout=30)
    # only what was counted while counting was on can have reached the file
    saved = json.loads(state.read_text())["languages"] if state.exists() else {}
    assert saved.get("python", {}).get("accepted", 0) == 0
