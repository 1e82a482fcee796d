"""The eval-infill harness: sandbox, HumanEval reading, table (infill_engine.evaluate)."""

from __future__ import annotations

import pytest

from infill_engine.evaluate import DEFAULT_DATA, format_table, read_humaneval, run_sandboxed


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


@pytest.mark.skipif(not DEFAULT_DATA.is_file(), reason="HumanEval infilling data not present")
def test_canonical_solutions_pass() -> None:
    rows = read_humaneval(DEFAULT_DATA, limit=3)
    assert len(rows) == 3
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


def test_table_formats_a_report() -> None:
    report = {
        "masked_accuracy": {"0.15": 0.5, "0.5": 0.4, "0.9": 0.2},
        "heldout_line_exact_match": 0.1,
        "heldout_lines": 10,
        "humaneval_single_line": None,
        "humaneval_missing": "x.jsonl.gz",
    }
    table = format_table(report)
    assert "50.0%" in table and "skipped" in table
