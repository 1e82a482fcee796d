"""What the service has done, for `GET /metrics`: requests by front, route and outcome, their
latency and tokens per forward pass as histograms (recorded as requests are answered), and the
scheduler's gauges (queue depth, running rows, mean batch, cache bytes) and counters with the
service's own, read from its stats when scraped.

prometheus_client keeps the counts and writes the text format. Each service has its own
CollectorRegistry, not the library's global one, so that several services (or tests) in one
process count apart and never clash on a name. Metric names are `dllm_<what>[_<unit>]`."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..fields import is_finite, is_number
from ..finish.secrets import FILTERED
from ..params import InfillResult
from ..percentiles import nearest_rank as nearest_rank  # where the lab's benchmarks import it

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
TOKENS_PER_PASS_BUCKETS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0)
PREFIX = "dllm"
CONTENT_TYPE = CONTENT_TYPE_LATEST  # the text format generate_latest writes (0.0.4)
# (name, stats key, help): the scheduler's state, read when scraped
GAUGES = (
    ("queue_depth", "queued", "requests waiting for a row"),
    ("running_rows", "running", "rows in the running batch"),
    ("mean_batch", "mean_batch", "rows per decode step, on average"),
    ("cache_bytes", "cache_bytes", "bytes of the running batch's K/V cache"),
)
SCHEDULER_COUNTERS = ("submitted", "done", "cancelled", "expired", "busy", "failed", "steps")


class Metrics:
    """One service's metrics. `stats` returns the service's stats (front.Service.stats: the
    scheduler's, with the service's counters under "service"), read at each scrape."""

    def __init__(self, stats: Callable[[], Mapping[str, Any]] = dict) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            f"{PREFIX}_requests",
            "requests answered, by front, route and code",
            ("front", "route", "code"),
            registry=self.registry,
        )
        self._latency = Histogram(
            f"{PREFIX}_request_seconds",
            "time from request to answer",
            ("front", "route"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._tokens_per_pass = Histogram(
            f"{PREFIX}_tokens_per_pass",
            "tokens committed per forward pass, per row",
            buckets=TOKENS_PER_PASS_BUCKETS,
            registry=self.registry,
        )
        self._passes = Counter(
            f"{PREFIX}_forward_passes", "forward passes of finished rows", registry=self.registry
        )
        self._tokens = Counter(
            f"{PREFIX}_tokens", "tokens written by finished rows", registry=self.registry
        )
        self.registry.register(_Scraped(stats))

    def observe(
        self, front: str, route: str, code: str, seconds: float, results: Iterable[InfillResult]
    ) -> None:
        """One request answered: `code` is "ok" or the error code."""
        self._requests.labels(front, route, code).inc()
        self._latency.labels(front, route).observe(seconds)
        for r in results:
            self._tokens.inc(r.tokens)
            self._passes.inc(r.nfe)
            if r.nfe:
                self._tokens_per_pass.observe(r.tokens / r.nfe)

    @property
    def requests(self) -> Tally[tuple[str, str, str]]:
        """Requests answered so far by (front, route, code); 0 for a key never seen."""
        out: Tally[tuple[str, str, str]] = Tally()
        for family in self._requests.collect():
            for s in family.samples:
                if s.name.endswith("_total"):
                    key = (s.labels["front"], s.labels["route"], s.labels["code"])
                    out[key] = int(s.value)
        return out

    def render(self) -> str:
        """The Prometheus text format (version 0.0.4)."""
        return generate_latest(_WithoutCreated(self.registry)).decode("utf-8")


class _WithoutCreated(Collector):
    """The registry without the `_created` timestamps prometheus_client adds to counters and
    histograms: /metrics serves the families it always has, and Prometheus derives resets from
    the counts themselves. (prometheus_client's switch for this is process-wide.)"""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            created = f"{family.name}_created"
            family.samples = [s for s in family.samples if s.name != created]
            yield family


class _Scraped(Collector):
    """The scheduler's gauges and counters and the service's counters, as the stats say at the
    scrape: they are kept by their owners, not copied here."""

    def __init__(self, stats: Callable[[], Mapping[str, Any]]) -> None:
        self.stats = stats

    def describe(self) -> Iterable[Metric]:
        return ()  # nothing to check at registration: the stats may not be ready yet

    def collect(self) -> Iterator[Metric]:
        stats = self.stats()
        for name, key, text in GAUGES:
            yield GaugeMetricFamily(f"{PREFIX}_{name}", text, value=_num(stats.get(key, 0)))
        for key in SCHEDULER_COUNTERS:
            value = _num(stats.get(key, 0))
            yield CounterMetricFamily(
                f"{PREFIX}_scheduler_{key}", f"scheduler rows {key}", value=value
            )
        held = CounterMetricFamily(
            f"{PREFIX}_secrets_filtered", "answers held back: they looked like a credential",
            labels=("rule",),
        )  # fmt: skip
        for rule, n in sorted(FILTERED.snapshot().items()):
            held.add_metric((rule,), float(n))
        yield held
        for key, value in sorted(stats.get("service", {}).items()):
            if is_number(value):
                yield CounterMetricFamily(
                    f"{PREFIX}_service_{key}", f"service {key}", value=_num(value)
                )


def _num(value: Any) -> float:
    return float(value) if is_finite(value) else 0.0
