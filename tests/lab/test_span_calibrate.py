"""`python -m dllm_lab.span_calibrate --measure`, run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_measure_counts_long_files_without_a_sequence_length_warning(tmp_path: Path) -> None:
    """Whole files are tokenized to count tokens, never run through the model: a file past the
    builtin model's 384 positions once printed transformers' "Token indices sequence length is
    longer than the specified maximum" warning."""
    funcs = "".join(
        f"def f{i}(alpha, beta):\n    return alpha * {i} + beta // {i + 1}\n\n" for i in range(30)
    )
    table = "TABLE = [" + ", ".join(str(i * 7919) for i in range(400)) + "]\n\n"
    (tmp_path / "long.py").write_text(funcs + table + funcs)
    p = subprocess.run(
        [sys.executable, "-m", "dllm_lab.span_calibrate", "--measure", "--sources",
         str(tmp_path), "--speed-positions", "0"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "python/all" in p.stdout  # it measured the file
    assert "sequence length" not in p.stderr and "Warning" not in p.stderr, p.stderr
