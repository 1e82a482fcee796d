"""The eval-infill harness: sandbox, HumanEval reading, baselines (dllm_lab)."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from dllm_lab.evaluate import (
    DEFAULT_DATA,
    format_table,
    heldout_bodies,
    mask_positions,
    read_humaneval,
    unigram_accuracy,
)
from dllm_lab.sandbox import run_sandboxed


def test_sandbox_pass_fail_timeout() -> None:
    assert run_sandboxed("assert 1 + 1 == 2\n")
    assert not run_sandboxed("raise SystemExit(1)\n")
    assert not run_sandboxed("assert False\n")
    assert not run_sandboxed("while True:\n    pass\n", timeout=1.0)


def test_sandbox_runs_in_a_scratch_dir_without_user_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLLM_SECRET", "x")
    assert run_sandboxed("import os\nassert 'DLLM_SECRET' not in os.environ\n")
    assert run_sandboxed("import os\nassert os.listdir('.') == ['program.py']\n")


def test_sandbox_has_no_network() -> None:
    assert not run_sandboxed("import socket\nsocket.create_connection(('127.0.0.1', 9))\n")
    assert not run_sandboxed("import socket\nsocket.socket()\n")
    assert run_sandboxed(
        "import socket\ntry:\n    socket.getaddrinfo('localhost', 80)\nexcept OSError:\n"
        "    raise SystemExit(0)\nraise SystemExit(1)\n"
    )


# six single-line problems of HumanEval-Infilling (MIT; tests/data/humaneval/README.md)
SAMPLE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "humaneval"
    / ("HumanEval-SingleLineInfilling-sample.jsonl")
)


def test_canonical_solutions_pass() -> None:
    rows = read_humaneval(SAMPLE, limit=3)
    assert [r["task_id"].split("/")[2] for r in rows] == ["23", "35", "45"]  # spread over six
    assert len(read_humaneval(SAMPLE, None)) == 6
    for row in rows:
        program = (
            row["prompt"]
            + row["canonical_solution"]
            + row["suffix"]
            + "\n"
            + row["test"]
            + f"\ncheck({row['entry_point']})\n"
        )
        assert run_sandboxed(program)
        assert not run_sandboxed(
            row["prompt"]
            + "    raise ValueError\n"
            + row["suffix"]
            + "\n"
            + row["test"]
            + f"\ncheck({row['entry_point']})\n"
        )


def test_the_published_gzip_reads_the_same_and_the_default_is_in_the_checkout(
    tmp_path: Path,
) -> None:
    packed = tmp_path / "HumanEval-SingleLineInfilling.jsonl.gz"
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    assert read_humaneval(packed, None) == read_humaneval(SAMPLE, None)
    root = Path(__file__).resolve().parents[2]
    assert DEFAULT_DATA.is_relative_to(root / "lab" / "data")  # not beside the checkout


def test_table_formats_a_report() -> None:
    acc = {"model": 0.5, "unigram_corpus": 0.08, "unigram_window": 0.12}
    report = {
        "masked_accuracy": {"0.15": acc, "0.5": acc, "0.9": acc},
        "ar_baseline": {"next_token_accuracy": 0.33},
        "heldout_lines": {
            "holes": 10,
            "span": 24,
            "exact_match_fixed_span": 0.1,
            "exact_match_oracle_span": 0.2,
            "tokens_per_forward_oracle": 1.7,
        },
        "heldout_bodies": {"holes": 5, "exact_match_oracle_span": 0.0, "tokens_per_forward": 2.5},
        "humaneval_single_line": None,
        "humaneval_missing": "x.jsonl.gz",
    }
    table = format_table(report)
    for want in ("50.0%", "8.0%", "12.0%", "33.0%", "20.0%", "1.70", "2.50", "skipped"):
        assert want in table
    he = {"problems": 4, "span": 24, "pass@1_fixed_span": 0.25, "pass@1_oracle_span": 0.5,
          "tokens_per_forward_fixed": 1.25, "ms_per_infill": 12.5}  # fmt: skip
    table = format_table({**report, "masked_accuracy": {}, "humaneval_single_line": he})
    rows = dict(tuple(c.strip() for c in ln.strip("|").split("|")) for ln in table.splitlines())
    assert rows["held-out masked-token accuracy"] == "skipped: no windows"
    assert rows["HumanEval single-line pass@1, span 24 (4)"] == "25.0%"
    assert rows["HumanEval single-line pass@1, oracle span (4)"] == "50.0%"
    assert rows["tokens per forward, HumanEval span 24"] == "1.25"
    assert rows["ms per infill (HumanEval, fixed span)"] == "12.5"


def test_unigram_baselines_count_what_they_claim() -> None:
    windows = torch.tensor([[5, 5, 5, 7, 9, 5], [7, 7, 1, 2, 7, 3]])
    positions = torch.tensor([[0, 3], [2, 4]])
    # corpus mode 5: right on (0,0) only -> 1 of 4
    assert unigram_accuracy(windows, positions, 5) == 0.25
    # window modes from the unmasked tokens: 5 in row 0 (hits (0,0)), 7 in row 1 (hits (1,4))
    assert unigram_accuracy(windows, positions, None) == 0.5
    pos = mask_positions(windows, 0.5, seed=1)
    assert pos.shape == (2, 3) and torch.equal(pos, mask_positions(windows, 0.5, seed=1))


def test_heldout_bodies_are_function_statements_after_the_docstring() -> None:
    text = (
        'import os\n\n\ndef f(a, b):\n    """Join."""\n    x = a + b\n    return x\n\n\n'
        "def g(): return 1\n\n\nclass C:\n    def m(self):\n        y = 1\n"
        "        return y\n"
    )
    bodies = heldout_bodies([text], 10, seed=0)
    middles = sorted(b.middle for b in bodies)
    assert middles == ["        y = 1\n        return y\n", "    x = a + b\n    return x\n"]
    for b in bodies:
        assert b.filled(b.middle) == text and b.kind == "function_body"


def test_sandbox_limits_bite() -> None:
    # memory: 1 GiB address space, so a 2 GiB allocation fails
    assert not run_sandboxed("x = bytearray(2 << 30)\n")
    assert run_sandboxed("x = bytearray(1 << 20)\n")
    # file size: 4 MiB per file
    assert not run_sandboxed("open('big', 'wb').write(b'x' * (8 << 20))\n")
    assert run_sandboxed("open('small', 'wb').write(b'x' * (1 << 20))\n")
    # CPU: a busy loop is killed by SIGXCPU after its CPU seconds, long before the wall timeout
    t0 = time.monotonic()
    assert not run_sandboxed("while True:\n    pass\n", timeout=60, cpu_seconds=1)
    assert time.monotonic() - t0 < 30
    assert run_sandboxed("sum(range(10))\n", timeout=60, cpu_seconds=1)


class _Scripted:
    """An engine whose fills are scripted: `answers` maps a prefix to the text it returns."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.spans: list[int] = []

    def encode(self, text: str) -> list[int]:
        return list(range(len(text.split())))  # one token per word

    def infill(self, prefix: str, suffix: str, params: Any) -> Any:
        self.spans.append(params.span)
        text = self.answers[prefix]
        return SimpleNamespace(text=text, tokens=4, nfe_full=1, nfe_block=1, elapsed_ms=2.0)


def test_exact_match_and_pass_at_1_arithmetic() -> None:
    from dllm_lab.evaluate import EvalConfig, exact_match, humaneval_pass
    from dllm_lab.holes import Hole
    from dllm_lab.humaneval import humaneval_holes

    holes = [
        Hole.cut("a = ", "1 + 2\n", "\n", "line"),  # right, trailing whitespace aside
        Hole.cut("b = ", "f(x)\n", "\n", "line"),  # wrong: a leading space is a different line
        Hole.cut("c = ", "g(y, z)\n", "\n", "line"),  # wrong text
    ]
    engine = _Scripted({"a = ": "1 + 2  \n\n", "b = ": " f(x)\n", "c = ": "g(y)\n"})
    stats = exact_match(engine, holes, None, None)
    assert (stats.passed, stats.total) == (1, 3) and stats.rate == pytest.approx(1 / 3)
    assert engine.spans == [3, 1, 2]  # oracle span: the middle's own token length
    assert stats.tokens_per_forward == 2.0  # 12 tokens over 6 forward passes
    fixed = exact_match(engine, holes, 24, None)
    assert engine.spans[3:] == [24, 24, 24] and fixed.passed == 1

    rows = [
        {
            "prompt": f"def {name}(x):\n",
            "suffix": "",
            "canonical_solution": "    return x + 1\n",
            "test": "def check(f):\n    assert f(1) == 2\n",
            "entry_point": name,
        }
        for name in ("inc", "bad")
    ]
    engine = _Scripted({"def inc(x):\n": "    return x + 1\n", "def bad(x):\n": "    return x\n"})
    he = humaneval_pass(engine, humaneval_holes(rows), None, EvalConfig(timeout=20))
    assert (he.passed, he.total) == (1, 2) and he.rate == 0.5
    assert engine.spans == [4, 4]


class _Oracle:
    """Scores the true token of each window position with certainty (and so is always right),
    or with `wrong` a fixed token everywhere."""

    mask_id = 1

    def __init__(self, truth: torch.Tensor, wrong: int | None = None) -> None:
        self.truth, self.wrong = truth, wrong

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(1, ids.shape[1], 16)
        row = next(t for t in self.truth if bool(((ids[0] == t) | (ids[0] == 1)).all()))
        target = row if self.wrong is None else torch.full_like(row, self.wrong)
        out[0, torch.arange(ids.shape[1]), target] = 1.0
        return out


def test_masked_accuracy_arithmetic() -> None:
    from dllm_lab.evaluate import masked_accuracy

    windows = torch.tensor([[2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 2]])
    pos = mask_positions(windows, 0.5, seed=3)
    assert masked_accuracy(_Oracle(windows), windows, pos) == 1.0
    # a model that always says 2 is right exactly where the truth is 2
    want = int((windows.gather(1, pos) == 2).sum()) / pos.numel()
    assert masked_accuracy(_Oracle(windows, wrong=2), windows, pos) == want


def test_span_eval_fills_the_same_holes_four_ways() -> None:
    """`eval-infill --task`: every setting fills every hole; the oracle's span is the middle's
    token length, the fixed span is the given one, and the scores are what the sandbox and the
    exact match say (a canonical solution passes, and a planted right answer is an exact match)."""
    from dllm_lab.holes import Hole
    from dllm_lab.span_eval import SETTINGS, corpus_holes, format_task, run_task, score
    from infill_engine import load

    text = "".join(f"def f{i}(x):\n    y = x + {i}\n    return y * 2\n\n\n" for i in range(8))
    holes = corpus_holes("single-line", [text], 3, seed=0)
    assert len(holes) == 3
    assert all(h.prefix + h.middle + h.suffix == text and h.middle.endswith("\n") for h in holes)
    spans = corpus_holes("random-span", [text], 3, seed=0)
    assert all(4 <= len(h.middle) <= 160 for h in spans)

    check = "def check(f):\n    assert f(1) == 2\n\ncheck(f)\n"
    right = Hole.cut("def f(x):\n", "    return x + 1\n", "\n", "humaneval", check=check)
    assert score(right, right.middle, 10.0) == (True, True)
    assert score(right, "    return x\n", 10.0) == (False, True)  # parses, fails its test
    assert score(right, "    return (\n", 10.0) == (False, False)
    plain = Hole.cut("a = 1\n", "b = 2\n", "c = 3\n", "line")
    assert score(plain, " b = 2 ", 1.0)[0] and not score(plain, "b = 3\n", 1.0)[0]

    engine = load("builtin")
    rows = run_task(engine, holes, 16, None, 10.0, "test", progress=False)
    assert list(rows) == list(SETTINGS)
    assert all(r["holes"] == 3 and r["nfe"] >= 1 for r in rows.values())
    assert rows["fixed"]["span"] == 16.0  # a fixed span neither grows nor shrinks
    true = sum(len(engine.encode(h.middle)) for h in holes) / 3
    assert rows["oracle"]["span"] == round(true, 1)
    table = format_task({"task": "single-line", "span": 16, "heldout": rows, "humaneval": None})
    assert table.count("| held-out |") == 4 and "skipped" in table


def test_no_windows_and_no_humaneval_say_so_without_a_traceback(tmp_path: Path) -> None:
    """--windows 0 once died in torch.stack of an empty list; a missing HumanEval file is
    skipped with a word on where to get it."""
    p = subprocess.run(
        [sys.executable, "-m", "infill_engine.cli", "eval-infill", "--windows", "0", "--lines",
         "0", "--bodies", "0", "--data", str(tmp_path / "none.jsonl.gz")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert "held-out masked-token accuracy" in p.stdout and "skipped: no windows" in p.stdout
    assert "github.com/openai/human-eval-infilling" in p.stderr and "--data" in p.stderr
