"""The snooze state (lsp_server/completion/snooze.py): minutes of no automatic suggestions."""

from __future__ import annotations

import pytest

from lsp_server.completion.snooze import MAX_MINUTES, Snooze


def test_snooze_runs_out_and_wakes_up() -> None:
    now = [100.0]
    s = Snooze(clock=lambda: now[0])
    assert s.remaining_s() == 0
    s.set(2)
    assert s.remaining_s() == 120
    now[0] += 119
    assert s.remaining_s() == pytest.approx(1)
    now[0] += 2
    assert s.remaining_s() == 0
    s.set(0.5)
    assert s.remaining_s() == 30
    s.set(0)  # wake up at once
    assert s.remaining_s() == 0


@pytest.mark.parametrize("bad", [-1, MAX_MINUTES + 1, "5", True, None, float("nan")])
def test_bad_minutes_are_refused(bad: object) -> None:
    s = Snooze()
    with pytest.raises(ValueError, match="minutes"):
        s.set(bad)  # type: ignore[arg-type]
    assert s.remaining_s() == 0
