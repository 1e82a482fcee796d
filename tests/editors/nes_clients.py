"""What test_copilot_lsp.py and test_sidekick.py share: a Neovim client of next edit suggestions
(vendored unmodified under vendor/), only configured by its driver script, run in a real
headless Neovim against dllm-infill-ls on `def area(w, h):`; the steps its driver wrote."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_neovim import SERVER, Neovim, install

SKIP = pytest.mark.skipif(
    os.environ.get("DLLM_EDITOR_TESTS") != "1",
    reason="editor tests run with DLLM_EDITOR_TESTS=1 (make editor-test)",
)
HERE = Path(__file__).resolve().parent
TEXT = "def area(w, h):\n    return w * h\n"


def drive_client(
    nvim: Neovim, tmp_path: Path, vendored: Path, script: str, want: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """Runs HERE/`script` in `nvim` with `vendored` first on the runtime path, on area.py (TEXT)
    in `tmp_path`; its steps by name, once no step failed and each of `want` was reached."""
    binary = install(nvim)
    assert SERVER.exists(), f"{SERVER} is missing: run make setup"
    (tmp_path / "area.py").write_text(TEXT)
    result = tmp_path / "result.jsonl"
    env = {
        **os.environ,
        "DLLM_LS": str(SERVER),
        "DLLM_RESULT": str(result),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    argv = [str(binary), "--clean", "--headless", "--cmd", f"set rtp^={vendored}"]
    proc = subprocess.run(
        [*argv, "-c", f"luafile {HERE / script}", "area.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=360,
    )  # fmt: skip
    output = proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = result.read_text().splitlines() if result.exists() else []
    steps = {s["step"]: s for s in map(json.loads, lines)}
    failed = [s for s in steps.values() if not s.get("ok")]
    assert not failed, f"{failed}\n{output}"
    missing = [s for s in want if s not in steps]
    assert not missing, f"steps not reached: {missing}\n{steps}\n{output}"
    return steps
