"""Requests become rows and rows become results in one public module (rows.py), and
`Engine.run` decodes through the live batch the scheduler steps, on the real builtin engine."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from infill_engine import Engine, InfillParams, load
from infill_engine.row import StepEvent
from infill_engine.rows import Rows
from infill_engine.stop import StopRule

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n"


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


def test_a_request_becomes_a_row_and_the_row_a_result(engine: Engine) -> None:
    rows = engine.rows
    assert isinstance(rows, Rows)
    request = engine.request(PREFIX, SUFFIX, InfillParams(span=6, min_tokens=6))
    row = rows.row(request)
    n = len(request.prefix_ids)
    assert row.canvas[:n].tolist() == list(request.prefix_ids)
    assert row.canvas[n : n + 6].tolist() == [engine.mask_id] * 6
    assert row.canvas[n + 6 :].tolist() == list(request.suffix_ids)
    assert row.request.params.threshold == engine.threshold  # the model's τ, filled in
    with pytest.raises(RuntimeError, match="unfinished"):
        rows.result(row, request)
    (ran,) = engine.run([request])
    assert len(ran.token_ids) == 6 and ran.text == engine.decode_ids(ran.token_ids)


def test_a_request_no_row_can_hold_is_one_line(engine: Engine) -> None:
    limit = engine.args.max_positions
    long = engine.request(PREFIX, SUFFIX, InfillParams(span=limit + 1, max_span=limit + 1))
    with pytest.raises(ValueError, match=f"exceeds the model's {limit} positions"):
        engine.rows.check(long)
    with pytest.raises(ValueError, match="positions"):
        engine.run([long])
    with pytest.raises(ValueError, match="positions"):  # refused before it is queued
        engine.scheduler().submit_request(long)


def test_the_stop_function_keeps_the_ids_that_reach_the_cut(engine: Engine) -> None:
    keep = engine.rows.stop_fn(StopRule("line"))
    ids = engine.encode("a + b\n    c = 1")
    n = keep(ids)
    assert n is not None and engine.decode_ids(ids[:n]).startswith("a + b")
    assert keep(engine.encode("a + b")) is None  # the line is still open


def test_run_takes_turns_with_the_scheduler_step_by_step(engine: Engine) -> None:
    """A private run holds the engine for a step, not for its whole loop: a completion on the
    scheduler finishes while the run is still between its steps (before, the run held the
    engine's lock from its first step to its last, and the completion waited for all of it)."""
    long = engine.request(PREFIX, SUFFIX, InfillParams(span=24, threshold=1.5, min_tokens=24))
    short = engine.request(PREFIX, SUFFIX, InfillParams(span=4, threshold=1.5, min_tokens=4))
    finished = threading.Event()
    events: list[StepEvent] = []

    def observer(event: StepEvent) -> None:
        events.append(event)
        if len(events) == 2:  # the run waits here, between its steps, for the completion
            ticket = engine.scheduler().submit_request(short, priority="invoked")
            if ticket.result(10).tokens == 4:
                finished.set()

    (result,) = engine.run([long], observer=observer)
    assert finished.is_set()
    assert result.tokens == 24 and len(events) == result.nfe
    assert [e.step for e in events] == list(range(1, len(events) + 1))
    assert events[-1].active == 0 and events[-1].cache_bytes == 0
