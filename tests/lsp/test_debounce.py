"""Adaptive debouncing: bounds, typing speed, model latency, pauses, and the async wait."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsp_server.completion.debounce import AdaptiveDebounce


def typed(debounce: AdaptiveDebounce, interval_s: float, keys: int = 10) -> AdaptiveDebounce:
    for i in range(keys):
        debounce.record_trigger(100.0 + i * interval_s)
    return debounce


def test_base_until_there_is_data() -> None:
    debounce = AdaptiveDebounce()
    assert debounce.delay_ms() == 75.0
    debounce.record_trigger(1.0)  # one trigger gives no interval yet
    debounce.record_latency(500.0)
    assert debounce.delay_ms() == 75.0
    assert AdaptiveDebounce(base_ms=1000.0).delay_ms() == 400.0


def test_zero_base_disables_debouncing() -> None:
    debounce = typed(AdaptiveDebounce(base_ms=0.0), 0.08)
    debounce.record_latency(300.0)
    assert debounce.delay_ms() == 0.0


def test_fast_typing_waits_longer_than_slow_typing() -> None:
    fast = typed(AdaptiveDebounce(), 0.08)
    slow = typed(AdaptiveDebounce(), 1.2)
    assert fast.delay_ms() == pytest.approx(120.0)
    assert slow.delay_ms() == 15.0
    assert fast.delay_ms() > slow.delay_ms()


def test_delay_outlasts_a_typing_burst() -> None:
    for interval_s in (0.03, 0.1, 0.2):
        assert typed(AdaptiveDebounce(), interval_s).delay_ms() > interval_s * 1000


def test_fast_model_shortens_the_wait_and_slow_model_keeps_it() -> None:
    quick = typed(AdaptiveDebounce(), 0.1)
    quick.record_latency(20.0)
    slow = typed(AdaptiveDebounce(), 0.1)
    slow.record_latency(600.0)
    assert quick.delay_ms() == pytest.approx(30.0)
    assert slow.delay_ms() == pytest.approx(150.0)


def test_pauses_are_ignored() -> None:
    debounce = typed(AdaptiveDebounce(), 0.08)
    before = debounce.delay_ms()
    debounce.record_trigger(1000.0)  # a coffee break
    assert debounce.delay_ms() == before
    debounce.record_trigger(1000.08)
    assert debounce.delay_ms() == pytest.approx(before)


def test_clock_going_backwards_or_nan_is_ignored() -> None:
    debounce = typed(AdaptiveDebounce(), 0.08)
    before = debounce.delay_ms()
    debounce.record_trigger(float("nan"))
    debounce.record_trigger(50.0)
    debounce.record_latency(float("inf"))
    debounce.record_latency(-1.0)
    assert debounce.delay_ms() == before


def test_invalid_bounds_are_rejected() -> None:
    with pytest.raises(ValueError):
        AdaptiveDebounce(min_ms=500.0, max_ms=400.0)
    with pytest.raises(ValueError):
        AdaptiveDebounce(base_ms=-1.0)


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=10.0), st.floats(min_value=0.0, max_value=1e5)
        ),
        max_size=30,
    ),
    st.floats(min_value=0.0, max_value=100.0),
    st.floats(min_value=0.0, max_value=100.0),
    st.floats(min_value=0.1, max_value=1000.0),
)
def test_delay_stays_within_bounds(
    events: list[tuple[float, float]], low: float, extra: float, base: float
) -> None:
    debounce = AdaptiveDebounce(base_ms=base, min_ms=low, max_ms=low + extra)
    now = 0.0
    for gap_s, latency_ms in events:
        now += gap_s
        debounce.record_trigger(now)
        debounce.record_latency(latency_ms)
        assert low <= debounce.delay_ms() <= low + extra


def _sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The seconds each asyncio.sleep is asked for, from now on (each still sleeps for real)."""
    asked: list[float] = []
    real = asyncio.sleep

    async def sleep(seconds: float) -> None:
        asked.append(seconds)
        await real(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    return asked


def test_wait_sleeps_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    """It asks for one sleep of the delay (not a wall-clock upper bound, which a loaded
    machine's scheduling could break), and sleeps at least that long."""
    debounce = AdaptiveDebounce(base_ms=40.0, min_ms=1.0)
    asked = _sleeps(monkeypatch)
    started = time.monotonic()
    asyncio.run(debounce.wait())
    elapsed = time.monotonic() - started
    assert asked == [pytest.approx(debounce.delay_ms() / 1000)]
    assert 0.035 <= asked[0] <= elapsed  # 40 ms, less the jitter of the first trigger


def test_wait_records_the_trigger() -> None:
    debounce = AdaptiveDebounce()
    asyncio.run(debounce.wait(now_s=10.0))
    asyncio.run(debounce.wait(now_s=10.1))
    assert debounce.delay_ms() == pytest.approx(150.0)  # 1.5 * 100 ms


def test_disabled_wait_returns_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _sleeps(monkeypatch)
    asyncio.run(AdaptiveDebounce(base_ms=0.0).wait())
    assert asked == []  # no sleep at all, not even a zero one
