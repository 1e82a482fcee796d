"""lab/calibrate_drafts.py on a small package written here: holes are found and drafted, the fit
never lowers its objective, and the gate's curve shows fewer holes as the gate rises."""

from __future__ import annotations

from pathlib import Path

import pytest

from infill_engine.drafts.lines import WEIGHTS
from infill_engine.lab.calibrate_drafts import cases, curve, fit, main, objective

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
    assert len(data) == 20 and any(any(ok for ok, _, _ in c) for c in data)
    fitted = fit(data, WEIGHTS, rounds=1)
    assert objective(data, fitted) >= objective(data, WEIGHTS)
    shown = [s for _, s, _ in curve(data, WEIGHTS, [-100.0, 0.0, 100.0])]
    assert shown[0] >= shown[1] >= shown[2] == 0.0
    assert main([str(tmp_path), "--holes", "5"]) == 0
    assert "the best draft is right for" in capsys.readouterr().out
