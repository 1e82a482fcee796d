"""The `quantize` setting: the real language server over stdio loads the builtin model with its
block weights in int8 (quantize.py), says so in `dllm/status`, and completes with it; a bad value
is one message and the default."""

from __future__ import annotations

from typing import Any

from lsp_client import GREET, SERVER, StdioPeer, init_params
from lsprotocol import converters


def started(peer: StdioPeer, settings: dict[str, Any]) -> dict[str, Any]:
    raw = converters.get_converter().unstructure(init_params(settings))
    peer.reply(peer.ask("initialize", raw))
    peer.notify("initialized", {})
    return peer.wait_loaded()


def test_the_server_loads_and_completes_with_int8_weights() -> None:
    peer = StdioPeer(SERVER)
    try:
        s = started(peer, {"model": "builtin", "device": "cpu", "quantize": "int8"})
        assert s["state"] == "ready", s["error"]
        assert s["quantize"] == "int8" and s["settings"]["quantize"] == "int8"
        assert 5 < s["weights_mib"] < 8  # 14.5 MiB in fp32; the embedding stays fp32
        peer.open("file:///work/greet.py", GREET)
        reply = peer.reply(
            peer.ask(
                "textDocument/inlineCompletion",
                {
                    "textDocument": {"uri": "file:///work/greet.py"},
                    "position": {"line": 2, "character": 4},
                    "context": {"triggerKind": 1},
                },
            ),
            timeout=60,
        )
        assert "result" in reply, reply
        assert peer.status()["model_calls"] >= 1
    finally:
        peer.kill()


def test_a_bad_quantize_value_is_told_and_the_default_used() -> None:
    peer = StdioPeer(SERVER)
    try:
        s = started(peer, {"model": "builtin", "device": "cpu", "quantize": "fp4"})
        assert s["state"] == "ready" and s["quantize"] == "none"
        assert s["weights_mib"] > 14
        assert any("'quantize'" in m and "none, int8, int4" in m for m in peer.shown), peer.shown
    finally:
        peer.kill()
