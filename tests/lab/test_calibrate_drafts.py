"""lab/calibrate_drafts.py on a small package written here: holes are found and drafted, the fit
never lowers its objective, the gate's fit gives confidences that rank right drafts over wrong
ones, and the gate's curve shows fewer holes as the gate rises."""

from __future__ import annotations

from pathlib import Path

import pytest

from dllm_lab.calibrate_drafts import cases, curve, fit, fit_gate, main, objective
from infill_engine.drafts.gate import GATE_MODEL
from infill_engine.drafts.weights import WEIGHTS

BLOCK = (
    "def load_{0}(db, key):\n"
    "    rows = db.query('{0}', key)\n"
    "    result = [dict(r) for r in rows if r]\n"
    "    total = sum(len(r) for r in result)\n"
    "    return result, total\n\n\n"
)


def _package(root: Path) -> Path:
    for name in ("users", "groups", "roles"):
        (root / f"{name}.py").write_text("".join(BLOCK.format(f"{name}_{i}") for i in range(4)))
    return root


def test_fit_and_curve_on_a_small_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = cases(_package(tmp_path), 10, seed=1)
    assert len(data) == 20 and any(any(o.text == c.truth for o in c.found) for c in data)
    fitted = fit(data, WEIGHTS, rounds=1)
    assert objective(data, fitted) >= objective(data, WEIGHTS)
    shown = [s for _, s, _ in curve(data, GATE_MODEL, [0.0, 0.5, 1.01])]
    assert shown[0] >= shown[1] >= shown[2] == 0.0
    # the fitted gate is surer, on average, of the holes whose first draft is right
    gate = fit_gate(data)
    sure: dict[bool, list[float]] = {True: [], False: []}
    for c in data:
        if ranked := c.served:
            sure[c.right(ranked[0])].append(gate.confidence(ranked, c.cursor.typed))
    assert sure[True] and sure[False]
    assert sum(sure[True]) / len(sure[True]) > sum(sure[False]) / len(sure[False])
    assert main([str(tmp_path), "--holes", "5", "--fit-gate"]) == 0
    out = capsys.readouterr().out
    assert "the best draft is right for" in out and "Gate(mean=" in out
    assert "the missing line stands whole in the code for" in out


def test_the_ceiling_counts_a_line_only_where_it_stands_whole(tmp_path: Path) -> None:
    """A line every block repeats stands elsewhere; a line that names its own block does not,
    nor one written once, though the document keeps the words typed before the cut."""
    data = cases(_package(tmp_path), 10, seed=1)
    repeated = [c for c in data if c.truth.startswith(("result =", "total ="))]
    named = [c for c in data if c.truth.startswith(("rows =", "def load_"))]
    assert repeated and all(c.anywhere for c in repeated)
    assert named and not any(c.anywhere for c in named)
    (tmp_path / "once.py").write_text("def only():\n    return 'written once, nowhere else'\n")
    lone = [c for c in cases(tmp_path, 40, seed=2) if "nowhere else" in c.truth]
    assert lone and not any(c.anywhere for c in lone)
