"""HumanEval-Infilling as this project reads it: the data file, its rows as holes, and the pass
tally that every evaluation of it keeps (evaluate.py, span_eval.py)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .holes import Hole

# lab/data/humaneval-infilling/ in the checkout (lab/data/README.md: where to get the files;
# they are not in the repository); --data names another file.
LAB_ROOT = Path(__file__).resolve().parents[1]
HUMANEVAL = "data/humaneval-infilling/HumanEval-SingleLineInfilling.jsonl.gz"
DEFAULT_DATA = LAB_ROOT / HUMANEVAL


def read_humaneval(path: Path, limit: int | None) -> list[dict[str, Any]]:
    """The rows of a HumanEval-Infilling file: .jsonl.gz as published, or plain .jsonl."""
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if limit is not None and limit < len(rows):
        stride = len(rows) / limit  # spread the subset over all 164 problems
        rows = [rows[int(i * stride)] for i in range(limit)]
    return rows


def humaneval_holes(rows: Sequence[dict[str, Any]]) -> list[Hole]:
    """Each problem's hole: its canonical solution taken out, its test and `check(entry_point)`
    the program that judges a fill."""
    return [
        Hole.cut(
            r["prompt"],
            r["canonical_solution"],
            r["suffix"],
            "humaneval",
            check=f"{r['test']}\ncheck({r['entry_point']})\n",
        )
        for r in rows
    ]


@dataclass
class PassStats:
    passed: int = 0
    total: int = 0
    tokens: int = 0
    forwards: int = 0
    ms: float = 0.0

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def tokens_per_forward(self) -> float:
        return self.tokens / self.forwards if self.forwards else 0.0

    def add(self, ok: bool, res: Any) -> None:
        self.passed += ok
        self.total += 1
        self.tokens += res.tokens
        self.forwards += res.nfe_full + res.nfe_block
        self.ms += res.elapsed_ms
