"""The watchdog in the engine's worker: a request whose own code holds a step past the bound
fails alone, and the worker goes on with the others."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest

from infill_engine import Engine, InfillParams, load
from infill_engine.scheduler import Scheduler
from infill_engine.stop import StopRule
from infill_engine.watchdog import StepTimeout, Watchdog

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n"
BOUND_S = 0.3


@dataclass(frozen=True)
class Stalling(StopRule):
    """A planted rule that never ends: the shape of the old empty-comment scan."""

    def cut(self, text: str) -> int | None:
        i = 0
        while True:
            i = (i + 1) % 7


@dataclass(frozen=True)
class Slow(StopRule):
    """A planted rule that ends, but only well past the bound (pure Python, interruptible)."""

    def cut(self, text: str) -> int | None:
        end = time.monotonic() + 5 * BOUND_S
        while time.monotonic() < end:
            pass
        return None


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    e.watchdog.bound_s = BOUND_S
    yield e
    e.close()


def test_the_guard_stops_endless_code_and_nothing_else() -> None:
    dog = Watchdog(0.1)
    try:
        t0 = time.monotonic()
        with pytest.raises(StepTimeout, match="bound"), dog.guard():
            while True:
                pass
        assert 0.1 <= time.monotonic() - t0 < 5
        for _ in range(1000):  # quick bodies are never touched
            with dog.guard():
                sum(range(100))
        with pytest.raises(StepTimeout), dog.guard():
            time.sleep(0.3)  # C code is not interrupted, but its guard still fails it
        total = 0
        for i in range(2_000_000):  # no exception is left pending to land out here
            total += i
        assert dog.fired == 2
    finally:
        dog.close()


@pytest.mark.parametrize("planted", [Stalling, Slow])
def test_a_request_that_holds_a_step_fails_alone_and_the_worker_goes_on(
    engine: Engine, planted: type[StopRule]
) -> None:
    params = InfillParams(span=16, threshold=1.5, min_tokens=16)  # one token per pass
    good = engine.request(PREFIX, SUFFIX, params)
    bad = replace(good, stop=planted("line"), max_span=16)
    with Scheduler(engine.live_batch, start=False) as s:
        before = [s.submit_request(good), s.submit_request(good)]
        stalled = s.submit_request(bad)
        after = s.submit_request(good)
        s.start()
        with pytest.raises(StepTimeout):
            stalled.result(60)
        for t in (*before, after):
            r = t.result(60)
            assert r.stop_reason == "span_full" and r.tokens == 16
        assert s.submit_request(engine.request(PREFIX, SUFFIX, params)).result(60).tokens == 16
        stats = s.stats()
        assert stats["failed"] == 1 and stats["done"] == 4
