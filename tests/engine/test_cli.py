"""The console script, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from infill_engine.cli import LAB, main
from infill_engine.cli_fill import split_at


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infill_engine.cli", *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip


def test_split_at_is_one_based() -> None:
    assert split_at("ab\ncd\n", 2, 2) == ("ab\nc", "d\n")
    assert split_at("ab\ncd\n", 1, 1) == ("", "ab\ncd\n")
    with pytest.raises(ValueError, match="line 9"):
        split_at("ab\n", 9, 1)
    with pytest.raises(ValueError, match="column 7"):
        split_at("ab\n", 1, 7)


def test_fill_json_on_builtin(tmp_path: Path, dream_dir: Path) -> None:
    src = tmp_path / "f.py"
    src.write_text("def add(a, b):\n    return \n")
    p = run_cli("fill", str(src), "--line", "2", "--col", "12", "--span", "8",
                "--model", str(dream_dir), "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["span"] == 8 and out["nfe_full"] >= 1
    assert out["stop_reason"] in ("end_token", "span_full")


def test_fill_with_auto_span_asks_the_planner(tmp_path: Path) -> None:
    """`fill` without --span takes the server's path: the planner's span, grown at most to its
    max_span, stopped at the construct's end."""
    from infill_engine import load, planner

    src = tmp_path / "f.py"
    text = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return \n"
    src.write_text(text)
    p = run_cli("fill", str(src), "--line", "5", "--col", "12", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    engine = load("builtin")
    offset = text.index("return \n") + len("return ")
    plan = planner.plan(text, offset, "python", engine.encode, max_positions=384)
    assert plan.kind == "line"
    assert plan.span <= out["span"] <= plan.max_span, (plan, out)
    assert out["stop_reason"] in ("end_token", "syntax", "span_full")
    assert "\n" not in out["text"]  # the rest of a line ends at its newline


def test_fill_bad_position_is_a_clear_error(tmp_path: Path) -> None:
    src = tmp_path / "f.py"
    src.write_text("x = 1\n")
    p = run_cli("fill", str(src), "--line", "40", "--col", "1")
    assert p.returncode == 2 and "line 40 is outside the file" in p.stderr


def test_bench_reports_ratios_to_its_own_baseline(dream_dir: Path) -> None:
    p = run_cli("bench", "--model", str(dream_dir), "--spans", "16", "--block-size", "8",
                "--context", "24", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert [(r["decode"], r["cache"]) for r in rows] == [
        ("fixed", "none"), ("threshold", "none"), ("threshold", "prefix"), ("threshold", "dual"),
        ("threshold", "dual+x"),
    ]  # fmt: skip
    base = rows[0]
    assert base["nfe_ratio"] == 1.0 and base["agree"] == 1.0
    assert base["nfe_full"] == base["nfe"] and base["nfe_block"] == 0
    dual, exact = rows[3], rows[4]
    assert dual["nfe_full"] == 2 and dual["nfe_block"] > 0  # one refresh per block of 8
    # the exact mode of speculate.py: the dual row's tokens, in no more passes
    assert exact["vs_eager"] == 1.0 and exact["nfe"] <= dual["nfe"]


def test_bench_cache_rows_agree_with_the_baseline_on_the_builtin_model() -> None:
    """At τ = 1.0 (one token per step) without a cache the decode is the baseline's, token for
    token; the cache rows really run window passes against their cache. How far their tokens
    drift from the baseline is a property of the model and the hole (on this small model one
    early flip moves everything after it: 0.16-1.0 across holes and spans), so it is reported,
    measured over several holes in test_builtin.py, and not pinned here to one hole."""
    p = run_cli("bench", "--spans", "64", "--thresholds", "1.0", "--json")
    assert p.returncode == 0, p.stderr
    rows = {r["cache"]: r for r in json.loads(p.stdout) if r["decode"] == "threshold"}
    assert rows["none"]["agree"] == 1.0  # the same decode as the baseline, every pass full
    assert all(0.0 < rows[c]["agree"] <= 1.0 for c in ("prefix", "dual")), rows
    assert rows["dual"]["nfe_block"] > 0 and rows["dual"]["nfe_full"] < rows["none"]["nfe_full"]
    assert rows["prefix"]["nfe_block"] > 0 and rows["prefix"]["nfe"] == rows["none"]["nfe"]


def test_bench_threshold_curve_has_every_cache_at_every_tau(dream_dir: Path) -> None:
    p = run_cli("bench", "--model", str(dream_dir), "--spans", "16", "--block-size", "8",
                "--context", "24", "--thresholds", "0.5,1.0", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert [(r["decode"], r["threshold"], r["cache"]) for r in rows] == [
        ("fixed", None, "none"),
        *[("threshold", t, c) for t in (0.5, 1.0) for c in ("none", "prefix", "dual", "dual+x")],
    ]
    base, exact = rows[0], rows[5]
    # τ = 1.0 without a cache commits the single most confident token per step: the baseline
    assert exact["nfe"] == base["nfe"] and exact["agree"] == 1.0
    bad = run_cli("bench", "--model", str(dream_dir), "--thresholds", "0,2")
    assert bad.returncode == 2 and "--thresholds" in bad.stderr


def test_help_lists_every_subcommand_with_what_it_does() -> None:
    p = run_cli("--help")
    assert p.returncode == 0, p.stderr
    rows = {
        line.split()[0]: line.split(None, 1)[1]
        for line in p.stdout.splitlines()
        if line.startswith("  ") and len(line.split()) > 1
    }
    for cmd in ("fill", "bench", "bench-lsp", "serve", "bench-serve", "bench-ray", "train",
                "eval-infill", "eval-crossfile"):  # fmt: skip
        assert len(rows.get(cmd, "")) > 20, (cmd, p.stdout)
    unknown = run_cli("fil")
    assert unknown.returncode == 2 and "unknown command 'fil'" in unknown.stderr


@pytest.mark.parametrize("cmd", sorted(LAB))
def test_a_lab_command_without_the_lab_is_one_line(
    cmd: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lab (lab/, dllm_lab) is a distribution of its own: where it is not installed, its
    commands say where it is instead of failing in an import."""
    monkeypatch.setitem(sys.modules, "dllm_lab", None)  # `import dllm_lab` fails as if absent
    assert main([cmd, "--help"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"dllm-infill {cmd}: the lab is a separate")
    assert "pip install -e lab/" in err


def test_a_span_past_the_models_positions_is_one_line(tmp_path: Path) -> None:
    """The builtin model has 384 positions: a span of 400 passes the 512 bound of the
    parameters and once failed inside the scheduler with a traceback."""
    src = tmp_path / "f.py"
    src.write_text("def add(a, b):\n    return \n")
    p = run_cli("fill", str(src), "--line", "2", "--col", "12", "--span", "400")
    assert p.returncode == 2, p.stdout
    assert p.stderr.strip() == "dllm-infill fill: --span 400 exceeds the model's 384 positions"


@pytest.mark.parametrize(
    ("command", "name", "why"),
    [("fill", "x" * 100_000, "(100000 characters): 100000 characters, more than the 1024 a "
      "model name or path may have"),
     ("check", "x" * 100_000, "(100000 characters): 100000 characters, more than the 1024"),
     ("fill", "x" * 300, "(300 characters): not a usable path (File name too long)")],
)  # fmt: skip
def test_a_model_name_too_long_is_one_short_line(
    tmp_path: Path, command: str, name: str, why: str
) -> None:
    """A 100 KB name once wrote a traceback five times its size; a name the system refuses
    (one part past 255 bytes) is one line too, the name cut."""
    src = tmp_path / "f.py"
    src.write_text("def add(a, b):\n    return \n")
    where = [str(src), "--line", "2", "--col", "12"] if command == "fill" else ["--device", "cpu"]
    p = run_cli(command, *where, "--model", name)
    assert p.returncode == 2, p.stdout
    assert p.stderr.startswith(f"dllm-infill {command}: model {'x' * 80!r}... ")
    assert why in p.stderr and p.stderr.count("\n") == 1 and len(p.stderr) < 400, p.stderr[:1000]


def corrupt_dir(tmp_path: Path) -> Path:
    bad = tmp_path / "corrupt"
    bad.mkdir()
    (bad / "config.json").write_text("{ not json")
    return bad


@pytest.mark.parametrize("what", ["missing", "corrupt", "cuda"])
def test_bench_mistakes_are_one_line(tmp_path: Path, what: str) -> None:
    if what == "cuda":
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
        args = ["--device", "cuda"]
    else:
        model = tmp_path / "nowhere" if what == "missing" else corrupt_dir(tmp_path)
        args = ["--model", str(model)]
    p = run_cli("bench", *args, "--spans", "16")
    assert p.returncode == 2, p.stdout
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("dllm-infill bench: ")
    assert {"missing": "no such directory", "corrupt": "config.json", "cuda": "CUDA"}[what] in (
        p.stderr
    )


def test_bench_uses_the_models_threshold_and_explains_agree() -> None:
    """The builtin directory recommends τ 0.5 (generation_config.json): the default threshold
    rows use it, not Fast-dLLM's 0.9."""
    p = run_cli("bench", "--spans", "16", "--block-size", "8", "--context", "24", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert {r["threshold"] for r in rows if r["decode"] == "threshold"} == {0.5}
    table = run_cli("bench", "--spans", "16", "--block-size", "8", "--context", "24")
    assert table.returncode == 0, table.stderr
    assert "agree: the share of span positions whose token equals the baseline's" in table.stdout


def _label(params: Any) -> str:
    """A bench row's cache label from its params (the exact mode is "+x")."""
    return params.cache + ("+x" if params.speculate == "exact" else "")


def test_bench_warms_every_configuration_before_timing_any(dream_engine: Any) -> None:
    """Each configuration fills once, untimed, before the first timed row: the baseline, timed
    first, once paid for the first calls of every code path (3.19x and 26.85x for the same
    dual row in two runs)."""
    from dllm_lab import bench

    calls: list[tuple[int, str, str]] = []
    real = dream_engine.run

    def run(requests: list[Any]) -> Any:
        calls.extend((r.span, r.params.decode, _label(r.params)) for r in requests)
        return real(requests)

    dream_engine.run = run
    try:
        rows = bench.run(dream_engine, [16], 8, [0.5], 24)
    finally:
        del dream_engine.run
    configs = {(d, c) for d, c, _ in bench.configs([0.5])}
    first_timed = next(i for i, (span, _, _) in enumerate(calls) if span == 16)
    assert {(d, c) for span, d, c in calls[:first_timed]} == configs
    assert {span for span, _, _ in calls[:first_timed]} == {8}  # one block
    assert len(rows) == len(configs) and len(calls) == 2 * len(configs)
