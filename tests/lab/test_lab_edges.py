"""The lab commands' edges a new user hit: bench says how long it has left, and refuses to build
a GPU-sized network on the CPU unless told to; eval-infill's HumanEval data lives in the
checkout, and a missing file names `--data`; train's progress bar counts to where the time
budget ends the run, not to a step count it never reaches."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

from dllm_lab.bench import TimeLeft, estimate
from dllm_lab.evaluate import HUMANEVAL_SOURCE, humaneval_path
from dllm_lab.humaneval import DEFAULT_DATA
from dllm_lab.train import steps_in_budget

CLI = [sys.executable, "-m", "infill_engine.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_bench_shows_the_time_left() -> None:
    p = run("bench", "--spans", "16", "--block-size", "8", "--context", "24", "--json")
    assert p.returncode == 0, p.stderr
    assert re.search(r"bench: .*runs \[\d+:\d\d, about \d+:\d\d left\]", p.stderr), p.stderr


def test_the_time_left_follows_the_runs() -> None:
    """Estimated from the warm-up, scaled by what the runs done took against their estimates,
    and counting down while a run goes on."""
    warm = {("fixed", "none", None): 1.0, ("threshold", "dual", 0.9): 0.5}
    # no cache: the span and the canvas; a cache: the span alone
    assert estimate(warm, 8, 24, 16, ("fixed", "none", None)) == pytest.approx(2 * 40 / 32)
    assert estimate(warm, 8, 24, 16, ("threshold", "dual", 0.9)) == pytest.approx(1.0)
    left = TimeLeft([2.0, 4.0, 3.0], ["a", "b", "a"])
    assert left.seconds() == pytest.approx(9.0, abs=0.1)
    left.started = time.monotonic() - 6.0  # "a" takes three times its estimate
    left.finish()
    left.start()
    # the next "a" from the one measured (9 s), "b" scaled by what the runs took (x3)
    assert left.seconds() == pytest.approx(9.0 + 12.0, abs=0.1)
    left.started = time.monotonic() - 2.0  # while "b" runs, its time counts down
    assert left.seconds() == pytest.approx(9.0 + 10.0, abs=0.1)


def test_a_gpu_sized_shape_on_a_machine_without_cuda_says_what_it_needs() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: --device auto builds it there")
    t0 = time.monotonic()
    p = run("bench", "--random-init", "--shape", "dream-7b")
    assert p.returncode == 2, p.stderr
    assert time.monotonic() - t0 < 60  # nothing was built
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dllm-infill bench: dream-7b"), p.stderr
    assert "needs about 30 GB" in lines[0] and "--device cuda" in lines[0]
    assert "--device cpu to build it anyway" in lines[0]


def test_eval_infill_reads_humaneval_from_the_checkout() -> None:
    assert ROOT in DEFAULT_DATA.parents  # lab/data/..., not beside the checkout
    assert (DEFAULT_DATA.parents[1] / "README.md").is_file()  # where to get the files
    assert humaneval_path(None, None) == DEFAULT_DATA
    task = humaneval_path(Path("/x/data.jsonl.gz"), "multi-line")
    assert task == Path("/x/HumanEval-MultiLineInfilling.jsonl.gz")
    assert "--data PATH" in HUMANEVAL_SOURCE


def test_eval_infill_says_a_missing_file_before_it_runs(tmp_path: Path) -> None:
    """The note naming --data comes first (flushed before any model work): a bad --model fails
    right after it, so the run takes seconds."""
    p = run("eval-infill", "--data", str(tmp_path / "none.jsonl"), "--model",
            str(tmp_path / "nowhere"))  # fmt: skip
    assert p.returncode == 2
    first = p.stderr.strip().splitlines()[0]
    assert "HumanEval will be skipped" in first and "--data PATH" in first, p.stderr


def test_train_counts_to_where_the_budget_ends_it() -> None:
    # a million steps asked, a minute's budget, 0.1 s a step: about 600 steps, not a million
    assert steps_in_budget(10, 1_000_000, 1.0, 60.0, 0.1) == 600
    assert steps_in_budget(10, 100, 1.0, 60.0, 0.1) == 100  # the steps end it first
    assert steps_in_budget(10, 100, 70.0, 60.0, 0.1) == 10  # past the budget: this step
    assert steps_in_budget(3, 100, 0.0, 60.0, 0.0) == 100
