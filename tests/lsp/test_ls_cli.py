"""`dllm-infill-ls` on the command line: its help names every command it has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def test_help_mentions_the_stats_command() -> None:
    p = subprocess.run(
        [str(BIN / "dllm-infill-ls"), "--help"], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "--tcp" in text and "dllm-infill-ls stats" in text and "accepted" in text
    stats = subprocess.run(
        [str(BIN / "dllm-infill-ls"), "stats", "--help"], capture_output=True, text=True, timeout=60
    )
    assert stats.returncode == 0 and "--json" in stats.stdout
