"""The scheduler on the real builtin engine: shared passes, priority order, a full queue,
deadlines and cancellation (queued and running)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from infill_engine import Engine, InfillParams, InfillRequest, load
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
    """The scheduler's on_join hook: the requests that joined the running batch, per step."""

    def __init__(self) -> None:
        self.joins: list[list[InfillRequest]] = []

    def __call__(self, tickets: list[Ticket]) -> None:
        self.joins.append([t.request for t in tickets])

    @property
    def sizes(self) -> list[int]:
        return [len(r) for r in self.joins]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def wait_until(cond: Any, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.005)


def test_requests_waiting_together_share_passes(engine: Engine, recorder: Recorder) -> None:
    with Scheduler(engine, max_batch=8, start=False, on_join=recorder) as s:
        spans = [8, 12, 16, 8]
        tickets = [s.submit(PREFIX, SUFFIX, fixed(n)) for n in spans]
        s.start()
        results = [t.result(60) for t in tickets]
        stats = s.stats()
    assert recorder.sizes == [4]  # all four joined at once and shared the forward passes
    # 16 steps; each step's rows: 4 for 8 steps, then 2 (the 12 and the 16), then 1
    assert stats["steps"] == 16 and stats["row_steps"] == sum(spans) and stats["done"] == 4
    assert [r.nfe for r in results] == spans and all(t.batch_size == 4 for t in tickets)
    # greedy: a batched request decodes exactly what it decodes alone
    alone = engine.run([engine.request(PREFIX, SUFFIX, fixed(12))])[0]
    assert results[1].text == alone.text and results[1].token_ids == alone.token_ids


def test_a_request_joins_the_running_batch_at_the_next_step(engine: Engine) -> None:
    """Continuous batching: a request that arrives while another decodes does not wait for it
    to end; it joins at the next step, decodes what it decodes alone, and leaves when done."""
    joined_at: list[int] = []
    with Scheduler(engine, max_batch=8) as s:
        s.on_join = lambda tickets: joined_at.append(s.stats()["steps"])
        long = s.submit(PREFIX, SUFFIX, fixed(160))
        wait_until(lambda: s.stats()["steps"] >= 3)
        short = s.submit("x = [1, 2", "]\n", fixed(8))
        r_short = short.result(60)
        assert not long.done()  # the short one ended first, inside the long one's decode
        r_long = long.result(60)
        stats = s.stats()
    assert joined_at[0] == 0 and joined_at[1] >= 3
    assert short.batch_size == 2 and r_short.nfe == 8 and r_long.nfe == 160
    assert stats["steps"] == 160 and stats["row_steps"] == 168  # 8 steps had both rows
    alone = engine.run([engine.request("x = [1, 2", "]\n", fixed(8))])[0]
    assert r_short.token_ids == alone.token_ids
    alone = engine.run([engine.request(PREFIX, SUFFIX, fixed(160))])[0]
    assert r_long.token_ids == alone.token_ids  # the join left the running row untouched


def test_requests_join_up_to_max_batch_highest_priority_first_fifo_within(
    engine: Engine, recorder: Recorder
) -> None:
    with Scheduler(engine, max_batch=2, start=False, on_join=recorder) as s:
        order = ["command", "automatic", "invoked", "automatic", "invoked", "command"]
        tickets: dict[InfillRequest, tuple[int, str]] = {}
        for i, priority in enumerate(order):
            t = s.submit(PREFIX, SUFFIX, fixed(8), priority=priority)  # type: ignore[arg-type]
            tickets[t.request] = (i, priority)
        s.start()
        wait_until(lambda: s.stats()["done"] == len(order))
    joins = [[tickets[r] for r in rnd] for rnd in recorder.joins]
    assert joins == [
        [(2, "invoked"), (4, "invoked")],
        [(1, "automatic"), (3, "automatic")],
        [(0, "command"), (5, "command")],
    ]


@pytest.mark.parametrize(("age_s", "first"), [(0.05, "command"), (100.0, "invoked")])
def test_a_waiting_request_rises_a_level_every_age_s(
    engine: Engine, recorder: Recorder, age_s: float, first: str
) -> None:
    """Aging: a command that has waited two `age_s` ranks with invoked completions and, being
    older, goes first; without aging (a long age_s) the completions keep going ahead of it."""
    with Scheduler(engine, max_batch=1, start=False, on_join=recorder, age_s=age_s) as s:
        command = s.submit(PREFIX, SUFFIX, fixed(8), priority="command")
        time.sleep(0.12)
        invoked = [s.submit(PREFIX, SUFFIX, fixed(8), priority="invoked") for _ in range(3)]
        s.start()
        wait_until(lambda: s.stats()["done"] == 4)
    order = [r[0] for r in recorder.joins]
    assert (order.index(command.request) == 0) == (first == "command")
    assert order[-1] is (invoked[-1].request if first == "command" else command.request)
    with pytest.raises(ValueError, match="age_s"):
        Scheduler(engine, age_s=0)


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
    with Scheduler(engine, start=False, on_join=recorder) as s:
        late = s.submit(PREFIX, SUFFIX, fixed(8), deadline_s=0.05)
        on_time = s.submit(PREFIX, SUFFIX, fixed(8), deadline_s=60)
        # it fails when its deadline passes, not when a worker gets to it
        with pytest.raises(DeadlineExceeded, match="deadline"):
            late.result(10)
        assert s.stats()["expired"] == 1 and s.stats()["queued"] == 1
        s.start()
        assert on_time.result(60).stop_reason == "span_full"
    assert recorder.sizes == [1] and recorder.joins[0][0] is on_time.request


def test_a_deadline_fails_on_time_while_the_batch_runs(engine: Engine) -> None:
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
    with Scheduler(engine, start=False, on_join=recorder) as s:
        a = s.submit(PREFIX, SUFFIX, fixed(8))
        b = s.submit(PREFIX, SUFFIX, fixed(8))
        assert s.cancel(a)
        with pytest.raises(Cancelled):
            a.result(1)  # at once, not when the worker gets to it
        assert s.stats()["queued"] == 1
        s.start()
        assert b.result(60).stop_reason == "span_full"
        assert s.stats()["cancelled"] == 1
    assert recorder.sizes == [1] and recorder.joins[0][0] is b.request


def test_cancelling_a_running_request_stops_it_at_its_next_step(engine: Engine) -> None:
    started = threading.Event()
    with Scheduler(engine, on_join=lambda tickets: started.set()) as s:
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
    real = engine._row

    def flaky(request: InfillRequest) -> Any:
        if request.params.seed == 666:
            raise ValueError("boom")
        return real(request)

    monkeypatch.setattr(engine, "_row", flaky)
    with Scheduler(engine, start=False) as s:
        bad = s.submit(PREFIX, SUFFIX, InfillParams(span=8, seed=666))
        good = s.submit(PREFIX, SUFFIX, fixed(8))
        s.start()
        with pytest.raises(ValueError, match="boom"):
            bad.result(30)
        assert good.result(30).stop_reason == "span_full"
        assert s.stats()["failed"] == 1


def test_a_model_failure_fails_its_step_s_requests_and_the_next_ones_run(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = engine.runner.step
    calls = {"n": 0}

    def failing_once(rows: Any, cache: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("CUDA out of memory (simulated)")
        real(rows, cache)

    monkeypatch.setattr(engine.runner, "step", failing_once)
    with Scheduler(engine, start=False) as s:
        a, b = s.submit(PREFIX, SUFFIX, fixed(8)), s.submit(PREFIX, SUFFIX, fixed(12))
        s.start()
        for t in (a, b):
            with pytest.raises(RuntimeError, match="out of memory"):
                t.result(30)
        after = s.submit(PREFIX, SUFFIX, fixed(8))
        assert after.result(30).stop_reason == "span_full"  # a fresh batch, a fresh cache
        stats = s.stats()
    assert stats["failed"] == 2 and stats["done"] == 1 and stats["running"] == 0


def test_tickets_report_queue_time(engine: Engine) -> None:
    with Scheduler(engine, start=False) as s:
        t: Ticket = s.submit(PREFIX, SUFFIX, fixed(8))
        time.sleep(0.03)
        s.start()
        t.result(30)
    assert t.queue_ms >= 25
