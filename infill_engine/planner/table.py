"""The calibrated span table (`assets/span_table.json`, written by `lab/span_calibrate.py`): per
hole kind, the ratio of span to same-file evidence and the default length without evidence."""

from __future__ import annotations

import json
import logging
from functools import cache
from pathlib import Path
from typing import Any

from ..fields import is_finite

log = logging.getLogger("infill_engine.planner")

TABLE = Path(__file__).parents[1] / "assets" / "span_table.json"
ROW_KEYS = ("ratio", "ratio_hi", "default", "default_hi")  # what the plan reads of a table row
LIKE = {"empty_body": "function_body"}  # a kind the table lacks is sized like this one
# Used only when the table is missing (a fresh calibration run writes it).
FALLBACK: dict[str, dict[str, float]] = {
    k: {"ratio": 1.0, "ratio_hi": 3.0, "default": d, "default_hi": 4 * d}
    for k, d in (
        ("line", 8),
        ("expression", 6),
        ("statement", 10),
        ("block_body", 40),
        ("function_body", 60),
        ("empty_body", 60),
        ("selection", 16),
    )
}


@cache
def load_table(path: Path = TABLE) -> dict[str, dict[str, float]]:
    """The calibrated table's kinds. A table that cannot be read, or an entry without the four
    positive numbers, is logged once as a warning and FALLBACK sizes those kinds: a planner
    that quietly ran on defaults would look calibrated while it is not."""
    try:
        data = json.loads(path.read_text())
        kinds = data["kinds"]
        if not isinstance(kinds, dict):
            raise ValueError("'kinds' is not a map")
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("span table %s is unusable (%s); default sizes are used", path, e)
        return {}
    table: dict[str, dict[str, float]] = {}
    for kind, row in kinds.items():
        values: list[Any] = [row.get(k) if isinstance(row, dict) else None for k in ROW_KEYS]
        if all(is_finite(v) and v > 0 for v in values):
            table[str(kind)] = {k: float(v) for k, v in zip(ROW_KEYS, values, strict=True)}
        else:
            keys = "/".join(ROW_KEYS)
            log.warning(
                "span table %s: kind %r lacks positive %s; defaults size it", path, kind, keys
            )
    return table


def row(kind: str) -> dict[str, float]:
    """The table's row for a kind: its own, else the kind it is sized like, else FALLBACK's."""
    table = load_table()
    return table.get(kind) or table.get(LIKE.get(kind, kind)) or FALLBACK[kind]
