"""The scheduler on the real builtin engine: shared passes, priority order, a full queue,
deadlines and cancellation (queued and running)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from infill_engine import Engine, InfillParams, InfillRequest, InfillResult, load
from infill_engine.scheduler import Busy, Cancelled, DeadlineExceeded, Scheduler, Ticket

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n"


def fixed(span: int) -> InfillParams:
    """`span` passes exactly: one token per pass (τ > 1), no early end."""
    return InfillParams(span=span, threshold=1.5, min_tokens=span)


@pytest.fixture(scope="module")
def engine() -> Engine:
    return load("builtin", device="cpu")


class Recorder:
    """Wraps engine.run to record each round's requests (the engine still does the work)."""

    def __init__(self, engine: Engine) -> None:
        self.real = engine.run
        self.rounds: list[list[InfillRequest]] = []

    def __call__(self, requests: Sequence[InfillRequest], observer: Any = None) -> Any:
        self.rounds.append(list(requests))
        return self.real(requests, observer=observer)

    @property
    def sizes(self) -> list[int]:
        return [len(r) for r in self.rounds]


@pytest.fixture
def recorder(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    rec = Recorder(engine)
    monkeypatch.setattr(engine, "run", rec)
    yield rec


def wait_until(cond: Any, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.005)


def test_requests_waiting_together_share_passes(engine: Engine, recorder: Recorder) -> None:
    with Scheduler(engine, max_batch=8, start=False) as s:
        spans = [8, 12, 16, 8]
        tickets = [s.submit(PREFIX, SUFFIX, fixed(n)) for n in spans]
        s.start()
        results = [t.result(60) for t in tickets]
        stats = s.stats()
    assert recorder.sizes == [4]  # one round, all four in the same forward passes
    assert stats["rounds"] == 1 and stats["mean_batch"] == 4.0 and stats["done"] == 4
    assert [r.nfe for r in results] == spans and all(t.batch_size == 4 for t in tickets)
    # greedy: a batched request decodes exactly what it decodes alone
    alone = engine.infill(PREFIX, SUFFIX, fixed(12))
    assert results[1].text == alone.text and results[1].token_ids == alone.token_ids


def test_rounds_take_max_batch_highest_priority_first_fifo_within(
    engine: Engine, recorder: Recorder
) -> None:
    with Scheduler(engine, max_batch=2, start=False) as s:
        order = ["command", "automatic", "invoked", "automatic", "invoked", "command"]
        tickets: dict[InfillRequest, tuple[int, str]] = {}
        for i, priority in enumerate(order):
            t = s.submit(PREFIX, SUFFIX, fixed(8), priority=priority)  # type: ignore[arg-type]
            tickets[t.request] = (i, priority)
        s.start()
        wait_until(lambda: s.stats()["done"] == len(order))
    rounds = [[tickets[r] for r in rnd] for rnd in recorder.rounds]
    assert rounds == [
        [(2, "invoked"), (4, "invoked")],
        [(1, "automatic"), (3, "automatic")],
        [(0, "command"), (5, "command")],
    ]


def test_a_full_queue_raises_busy(engine: Engine) -> None:
    with Scheduler(engine, max_queue=2, start=False) as s:
        s.submit(PREFIX, SUFFIX, fixed(8))
        s.submit(PREFIX, SUFFIX, fixed(8))
        with pytest.raises(Busy, match="queue is full"):
            s.submit(PREFIX, SUFFIX, fixed(8))
        assert s.stats()["busy"] == 1 and s.stats()["queued"] == 2


def test_a_request_past_its_deadline_before_it_starts_fails(
    engine: Engine, recorder: Recorder
) -> None:
    with Scheduler(engine, start=False) as s:
        late = s.submit(PREFIX, SUFFIX, fixed(8), deadline_s=0.05)
        on_time = s.submit(PREFIX, SUFFIX, fixed(8), deadline_s=60)
        # it fails when its deadline passes, not when a worker gets to it
        with pytest.raises(DeadlineExceeded, match="deadline"):
            late.result(10)
        assert s.stats()["expired"] == 1 and s.stats()["queued"] == 1
        s.start()
        assert on_time.result(60).stop_reason == "span_full"
    assert recorder.sizes == [1] and recorder.rounds[0][0] is on_time.request


def test_a_deadline_fails_on_time_while_a_round_runs(engine: Engine) -> None:
    with Scheduler(engine, max_batch=1) as s:
        long = s.submit(PREFIX, SUFFIX, fixed(96))
        wait_until(lambda: long.state == "running")
        waiting = s.submit(PREFIX, SUFFIX, fixed(8), deadline_s=0.05)
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            waiting.result(30)
        assert not long.done() and time.monotonic() - t0 < 0.5
        s.cancel(long)


def test_cancelling_a_queued_request_means_it_never_starts(
    engine: Engine, recorder: Recorder
) -> None:
    with Scheduler(engine, start=False) as s:
        a = s.submit(PREFIX, SUFFIX, fixed(8))
        b = s.submit(PREFIX, SUFFIX, fixed(8))
        assert s.cancel(a)
        with pytest.raises(Cancelled):
            a.result(1)  # at once, not when the worker gets to it
        assert s.stats()["queued"] == 1
        s.start()
        assert b.result(60).stop_reason == "span_full"
        assert s.stats()["cancelled"] == 1
    assert recorder.sizes == [1] and recorder.rounds[0][0] is b.request


def test_cancelling_a_running_request_stops_it_at_its_next_step(engine: Engine) -> None:
    started = threading.Event()
    with Scheduler(engine, on_round=lambda batch: started.set()) as s:
        long = s.submit(PREFIX, SUFFIX, fixed(256))
        short = s.submit(PREFIX, SUFFIX, fixed(8))
        assert started.wait(30)
        wait_until(lambda: long.state == "running")
        time.sleep(0.05)  # a few passes in
        assert s.cancel(long)
        r = long.result(30)
        assert r.stop_reason == "cancelled" and r.nfe < 128
        assert short.result(30).stop_reason == "span_full"
        wait_until(lambda: s.stats()["running"] == 0)
        stats = s.stats()
    assert stats["cancelled"] == 1 and stats["done"] == 1


def test_the_request_s_own_event_cancels_it_too(engine: Engine) -> None:
    event = threading.Event()
    with Scheduler(engine, start=False) as s:
        t = s.submit(PREFIX, SUFFIX, fixed(8), cancel=event)
        event.set()
        s.start()
        with pytest.raises(Cancelled):
            t.result(30)


def test_close_cancels_queued_and_running(engine: Engine) -> None:
    s = Scheduler(engine, max_batch=1)
    running = s.submit(PREFIX, SUFFIX, fixed(256))
    queued = s.submit(PREFIX, SUFFIX, fixed(8))
    wait_until(lambda: running.state == "running")
    s.close()
    assert running.result(10).stop_reason == "cancelled"
    with pytest.raises(Cancelled):
        queued.result(10)
    after = s.submit(PREFIX, SUFFIX, fixed(8))
    with pytest.raises(Cancelled, match="closed"):
        after.result(1)


def test_a_request_the_engine_cannot_run_is_refused_or_fails_alone(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    too_long = engine.args.max_positions + 1
    with Scheduler(engine) as s, pytest.raises(ValueError, match="positions"):
        s.submit(PREFIX, SUFFIX, InfillParams(span=too_long, max_span=too_long))
    real = engine.run

    def flaky(requests: Sequence[InfillRequest], observer: Any = None) -> list[InfillResult]:
        if any(r.params.seed == 666 for r in requests):
            raise RuntimeError("boom")
        return real(requests, observer=observer)

    monkeypatch.setattr(engine, "run", flaky)
    with Scheduler(engine, start=False) as s:
        bad = s.submit(PREFIX, SUFFIX, InfillParams(span=8, seed=666))
        good = s.submit(PREFIX, SUFFIX, fixed(8))
        s.start()
        with pytest.raises(RuntimeError, match="boom"):
            bad.result(30)
        assert good.result(30).stop_reason == "span_full"
        assert s.stats()["failed"] == 1


def test_tickets_report_queue_time(engine: Engine) -> None:
    with Scheduler(engine, start=False) as s:
        t: Ticket = s.submit(PREFIX, SUFFIX, fixed(8))
        time.sleep(0.03)
        s.start()
        t.result(30)
    assert t.queue_ms >= 25
