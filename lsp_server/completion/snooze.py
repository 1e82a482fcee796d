"""Snooze: N minutes with no automatic suggestions (an invoked request still answers). One
state per session, set by the `dllm.snooze` command, so every editor shares the same switch."""

from __future__ import annotations

import time
from collections.abc import Callable

from infill_engine.fields import number_in

MAX_MINUTES = 24 * 60  # a day; longer is "turn it off", which `completion.languages` does


class Snooze:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until = 0.0

    def set(self, minutes: float) -> None:
        """Snooze for `minutes` from now (0 wakes up); ValueError past [0, MAX_MINUTES]."""
        minutes = number_in(minutes, "minutes", 0, MAX_MINUTES)
        self._until = self._clock() + 60.0 * minutes if minutes > 0 else 0.0

    def remaining_s(self) -> float:
        """Seconds of snooze left; 0 when awake."""
        return max(0.0, self._until - self._clock())
