"""What the service has done, for `GET /metrics` in Prometheus' text format: requests by front,
route and outcome, their latency and tokens per forward pass as histograms, and the scheduler's
gauges (queue depth, running rows, mean batch) and counters, read when scraped.

Written on the event loop only (both fronts record there), so no lock is needed."""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..params import InfillResult

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
TOKENS_PER_PASS_BUCKETS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0)
PREFIX = "dllm"


def nearest_rank(values: Iterable[float], q: float) -> float | None:
    """The nearest-rank q-th percentile (0 < q <= 100) of the values, or None of none."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(len(ordered) * q / 100)) - 1]


@dataclass
class Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.n += 1

    def lines(self, name: str, labels: str) -> Iterable[str]:
        sep = "," if labels else ""
        running = 0
        for bound, count in zip(self.bounds, self.counts, strict=False):
            running += count
            yield f'{name}_bucket{{{labels}{sep}le="{bound:g}"}} {running}'
        yield f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.n}'
        tail = f"{{{labels}}}" if labels else ""
        yield f"{name}_sum{tail} {self.total:.6f}"
        yield f"{name}_count{tail} {self.n}"


class Metrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, str], int] = defaultdict(int)
        self.latency: dict[tuple[str, str], Histogram] = {}
        self.tokens_per_pass = Histogram(TOKENS_PER_PASS_BUCKETS)
        self.tokens = 0
        self.passes = 0

    def observe(
        self, front: str, route: str, code: str, seconds: float, results: Iterable[InfillResult]
    ) -> None:
        """One request answered: `code` is "ok" or the error code."""
        self.requests[(front, route, code)] += 1
        key = (front, route)
        if key not in self.latency:
            self.latency[key] = Histogram(LATENCY_BUCKETS)
        self.latency[key].observe(seconds)
        for r in results:
            self.tokens += r.tokens
            self.passes += r.nfe
            if r.nfe:
                self.tokens_per_pass.observe(r.tokens / r.nfe)

    def render(self, scheduler: Mapping[str, Any], service: Mapping[str, Any]) -> str:
        """Prometheus text format (version 0.0.4)."""
        out: list[str] = []

        def family(name: str, kind: str, help_text: str) -> str:
            full = f"{PREFIX}_{name}"
            out.append(f"# HELP {full} {help_text}")
            out.append(f"# TYPE {full} {kind}")
            return full

        gauges = (
            ("queue_depth", "queued", "requests waiting for a row"),
            ("running_rows", "running", "rows in the running batch"),
            ("mean_batch", "mean_batch", "rows per decode step, on average"),
            ("cache_bytes", "cache_bytes", "bytes of the running batch's K/V cache"),
        )
        for name, key, text in gauges:
            full = family(name, "gauge", text)
            out.append(f"{full} {_num(scheduler.get(key, 0))}")
        for key in ("submitted", "done", "cancelled", "expired", "busy", "failed", "steps"):
            full = family(f"scheduler_{key}_total", "counter", f"scheduler rows {key}")
            out.append(f"{full} {_num(scheduler.get(key, 0))}")
        full = family("forward_passes_total", "counter", "forward passes of finished rows")
        out.append(f"{full} {self.passes}")
        full = family("tokens_total", "counter", "tokens written by finished rows")
        out.append(f"{full} {self.tokens}")
        for key, value in sorted(service.items()):
            if isinstance(value, int | float) and not isinstance(value, bool):
                full = family(f"service_{key}_total", "counter", f"service {key}")
                out.append(f"{full} {_num(value)}")
        full = family("requests_total", "counter", "requests answered, by front, route and code")
        for (front, route, code), n in sorted(self.requests.items()):
            out.append(f'{full}{{front="{front}",route="{route}",code="{code}"}} {n}')
        full = family("request_seconds", "histogram", "time from request to answer")
        for (front, route), hist in sorted(self.latency.items()):
            out.extend(hist.lines(full, f'front="{front}",route="{route}"'))
        full = family("tokens_per_pass", "histogram", "tokens committed per forward pass, per row")
        out.extend(self.tokens_per_pass.lines(full, ""))
        return "\n".join(out) + "\n"


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "0"
    return f"{value:g}" if isinstance(value, float) else str(value)
