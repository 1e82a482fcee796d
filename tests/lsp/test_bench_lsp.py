"""`dllm-infill bench-lsp`, run as a user runs it: it leaves the user's acceptance counts alone
and writes valid JSON when a figure has no samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_bench_lsp_keeps_out_of_the_users_counts_and_writes_null_not_nan(tmp_path: Path) -> None:
    """With no timed requests (-n 0) every figure has no samples: null in --json (a bare NaN
    once, which JSON parsers refuse), "-" in the table. The warm-up request still runs through
    the server, whose counts once went into the user's own stats file."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}  # the user's state directory
    p = subprocess.run(
        [sys.executable, "-m", "infill_engine.cli", "bench-lsp", "-n", "0", "--json"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = strict(p.stdout)
    assert out["requests"] == 0
    assert out["typeahead_ms"] == {"p50": None, "p95": None, "mean": None}
    assert not (tmp_path / "dllm-infill" / "stats.json").exists(), list(tmp_path.rglob("*"))
    bad = subprocess.run(
        [sys.executable, "-m", "infill_engine.cli", "bench-lsp", "-n", "-1"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert bad.returncode == 2 and "--requests must be >= 0" in bad.stderr


def test_the_automatic_pass_edits_as_an_editor_does_and_puts_the_sample_back(
    tmp_path: Path,
) -> None:
    """Its requests follow ranged changes (the line's text removed, then put back), their
    positions in UTF-16 as the client negotiated: the bench checks that the server's text is
    the sample's at the end, and fails otherwise (a line with an emoji before the cursor's
    end puts a position counted in code points off by one)."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(x):\n    s = '\U0001f600' + x\n    t = '\U0001f600\U0001f600' * 2\n"
        "    return s + t\n",
        encoding="utf-8",
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    p = subprocess.run(
        [sys.executable, "-m", "infill_engine.cli", "bench-lsp", "-n", "4", "--json",
         "--sample", str(sample)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert strict(p.stdout)["automatic"]["requests"] == 4
