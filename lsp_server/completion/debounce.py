"""Adaptive debouncing of automatic inline-completion triggers.

A model call started between two keystrokes of a burst is wasted: its answer is stale before it
arrives. So the delay before calling follows the user's typing:

* I, an exponential moving average of the interval between automatic triggers (gaps over 5 s
  are pauses, not typing, and are skipped), and L, the same average of the model's latency.
* Typing part: T = min(1.5 * I, max_ms, 2 * max_ms - I). A fast typist (I = 80 ms) gets
  T = 120 ms, enough to see whether the burst goes on. Once the typical gap exceeds what we are
  willing to wait, every keystroke is already followed by a pause, so T falls back towards 0:
  a slow typist gets the shortest delay.
* Latency part: T is scaled by min(1, L / I). When the model answers before the next keystroke
  would come (L < I), a call in the middle of a burst still pays off and the wait shrinks.
* delay = clamp(T, min_ms, max_ms); before any typing interval is known, clamp(base_ms).

base_ms == 0 disables debouncing: the delay is always 0.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from ..options import DEBOUNCE_CEILING_MS

_PAUSE_S = 5.0
_ALPHA = 0.3  # weight of the newest sample: a few keystrokes are enough to adapt


def _ema(old: float | None, sample: float) -> float:
    return sample if old is None else old + _ALPHA * (sample - old)


@dataclass
class AdaptiveDebounce:
    """The delay before an automatic completion request, learnt from typing and model speed."""

    base_ms: float = 75.0
    min_ms: float = 15.0
    max_ms: float = DEBOUNCE_CEILING_MS
    _last_trigger_s: float | None = field(default=None, init=False, repr=False)
    _interval_ms: float | None = field(default=None, init=False, repr=False)
    _latency_ms: float | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.min_ms <= self.max_ms or self.base_ms < 0:
            raise ValueError(
                f"need 0 <= min_ms <= max_ms and base_ms >= 0, got base_ms={self.base_ms}, "
                f"min_ms={self.min_ms}, max_ms={self.max_ms}"
            )

    def record_trigger(self, now_s: float) -> None:
        """Note an automatic trigger at now_s (seconds on a monotonic clock)."""
        if not math.isfinite(now_s):
            return
        last, self._last_trigger_s = self._last_trigger_s, now_s
        if last is not None and 0 < now_s - last <= _PAUSE_S:
            self._interval_ms = _ema(self._interval_ms, (now_s - last) * 1000)

    def record_latency(self, ms: float) -> None:
        """Note how long the model took for one completion."""
        if math.isfinite(ms) and ms >= 0:
            self._latency_ms = _ema(self._latency_ms, ms)

    def delay_ms(self) -> float:
        """How long to wait before calling the model; see the module docstring."""
        if self.base_ms == 0:
            return 0.0
        interval = self._interval_ms
        if interval is None:
            return self._clamp(self.base_ms)
        typing = min(1.5 * interval, self.max_ms, 2 * self.max_ms - interval)
        if self._latency_ms is not None:
            typing *= min(1.0, self._latency_ms / interval)
        return self._clamp(typing)

    def _clamp(self, ms: float) -> float:
        return max(self.min_ms, min(ms, self.max_ms))

    async def wait(self, now_s: float | None = None) -> None:
        """Record a trigger now (or at now_s) and sleep for the delay."""
        self.record_trigger(time.monotonic() if now_s is None else now_s)
        delay = self.delay_ms()
        if delay > 0:
            await asyncio.sleep(delay / 1000)
