"""Percentiles of a few latencies, as the service's benchmarks and the language server's stats
report them. A module of its own so that the language server reads them without the service's
metrics (prometheus_client)."""

from __future__ import annotations

import math
from collections.abc import Iterable


def nearest_rank(values: Iterable[float], q: float) -> float | None:
    """The nearest-rank q-th percentile (0 < q <= 100) of the values, or None of none."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(len(ordered) * q / 100)) - 1]
