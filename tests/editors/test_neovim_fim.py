"""A Mercury-shaped completion API (tests/lsp/fim_standin.py) on loopback serves inline
completions in a real headless Neovim through the plugin and the real language server
(`engineAddress: "openai+URL"`): the stand-in's model writes the line and more, our finish cuts
it to the line, and accepting it inserts exactly that. Off unless DLLM_EDITOR_TESTS=1, like
test_neovim.py, whose Neovim installs it shares."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from lsp.fim_standin import KEY, MODEL, Standin, running
from test_neovim import NEOVIMS, ROOT, SERVER, Neovim, install

pytestmark = pytest.mark.skipif(
    os.environ.get("DLLM_EDITOR_TESTS") != "1",
    reason="editor tests run with DLLM_EDITOR_TESTS=1 (make editor-test)",
)

HERE = Path(__file__).resolve().parent
TEXT = "def add(a, b):\n    return\n\n\nprint(add(1, 2))\n"
ANSWER = "a + b\n\n\ndef extra():\n    pass\n"  # more than the hole wants


@pytest.mark.parametrize("nvim", NEOVIMS, ids=[n.label for n in NEOVIMS])
def test_neovim_completes_through_a_mercury_shaped_api(nvim: Neovim, tmp_path: Path) -> None:
    binary = install(nvim)
    source = tmp_path / "add.py"
    source.write_text(TEXT)
    result = tmp_path / "result.jsonl"
    with running(Standin(ANSWER)) as standin:
        env = {
            **os.environ,
            "DLLM_LS": str(SERVER),
            "DLLM_FIM_ADDRESS": "openai+" + standin.base,
            "DLLM_API_KEY": KEY,
            "DLLM_RESULT": str(result),
        }
        plugin, script = ROOT / "editors" / "nvim", HERE / "drive_fim.lua"
        argv = [str(binary), "--clean", "--headless", "--cmd", f"set rtp^={plugin}"]
        proc = subprocess.run(
            [*argv, "-c", f"luafile {script}", str(source)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        sent = standin.completions()
    lines = result.read_text().splitlines() if result.exists() else []
    steps = {s["step"]: s for s in map(json.loads, lines)}
    output = proc.stdout[-2000:] + proc.stderr[-2000:]
    failed = [s for s in steps.values() if not s.get("ok")]
    assert not failed, f"{failed}\n{output}"
    assert {"attach", "ready", "ghost", "accept", "done"} <= set(steps), f"{steps}\n{output}"
    assert steps["ready"]["model"] == MODEL and steps["ready"]["torch"] is False
    assert steps["ghost"]["text"] == "a + b"  # the stand-in's line, cut by our finish
    assert sent and sent[0].path == "/v1/fim/completions" and sent[0].auth == f"Bearer {KEY}"
    assert sent[0].body["prompt"].endswith("    return ") and sent[0].body["stream"] is True
