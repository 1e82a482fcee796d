"""The command line's edges a new user hit: a bad number is one argparse line (the same check
for fill and bench: infill_engine/cli_args.py), int4 on the CPU warns once, `check` gives a
small model's parameters in a unit that shows them. Real CLI subprocesses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from infill_engine.fits import parameters

CLI = [sys.executable, "-m", "infill_engine.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.mark.parametrize(
    ("option", "value", "why"),
    [
        ("--threshold", "2", "argument --threshold: must be a number in (0, 1], got '2'"),
        ("--threshold", "0", "argument --threshold: must be a number in (0, 1], got '0'"),
        ("--span", "abc", "argument --span: must be auto or a whole number in [1, "),
        ("--span", "0", "argument --span: must be auto or a whole number in [1, "),
    ],
)
def test_fill_refuses_a_bad_number_in_one_line(
    tmp_path: Path, option: str, value: str, why: str
) -> None:
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    p = run("fill", str(src), "--line", "1", "--col", "1", option, value)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("dllm-infill fill: error: ") and why in last, p.stderr


@pytest.mark.parametrize(
    ("option", "value", "why"),
    [
        ("--thresholds", "0.5,2", "argument --thresholds: must be a number in (0, 1], got '2'"),
        ("--spans", "64,abc", "argument --spans: must be an int in [1, "),
    ],
)
def test_bench_refuses_a_bad_number_with_the_same_check(option: str, value: str, why: str) -> None:
    p = run("bench", option, value)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert why in p.stderr.strip().splitlines()[-1], p.stderr


def test_int4_on_the_cpu_warns_once(tmp_path: Path) -> None:
    """The loader quantizes one block at a time; the slow-path warning is said once, not once
    per block."""
    pytest.importorskip("torchao")
    src = tmp_path / "a.py"
    src.write_text("def f(x):\n    \n")
    p = run("fill", str(src), "--line", "2", "--col", "5", "--quantize", "int4",
            "--device", "cpu", "--no-workspace")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("slow int4 path") == 1, p.stderr


def test_check_gives_a_small_models_parameters_in_millions() -> None:
    p = run("check", "--model", "builtin")
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stdout.splitlines() if "parameters" in x)
    assert " M parameters" in line and "0.00 B" not in line, line
    assert [parameters(n) for n in (7.62e9, 3_786_240, 850_000, 12)] == [
        "7.62 B", "3.8 M", "850 K", "12",
    ]  # fmt: skip
