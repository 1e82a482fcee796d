"""The scheduler on the real builtin engine: shared passes, priority order, a full queue,
deadlines and cancellation (queued and running).

No test here waits for time to pass: the worker is held at a chosen step by a hook (the
`on_join` hook, or one after every step of its running batch), and aging and queue times read
the scheduler's clock, which a test replaces with one it moves itself."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from infill_engine import Engine, InfillParams, InfillRequest, InfillResult, load
from infill_engine import scheduler as scheduler_module
from infill_engine.scheduler import Busy, Cancelled, DeadlineExceeded, Scheduler, Ticket

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n"


def fixed(span: int) -> InfillParams:
    """`span` passes exactly: one token per pass (τ > 1), no early end."""
    return InfillParams(span=span, threshold=1.5, min_tokens=span)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()  # its scheduler's and watchdog's threads end with the module


Alone = Callable[[str, str, int], InfillResult]


@pytest.fixture(scope="module")
def alone(engine: Engine) -> Alone:
    """What a request decodes alone, in a plain block loop of its own (no scheduler): the
    reference for batched ones, computed once per hole."""
    done: dict[tuple[str, str, int], InfillResult] = {}

    def result(prefix: str, suffix: str, span: int) -> InfillResult:
        if (prefix, suffix, span) not in done:
            request = engine.request(prefix, suffix, fixed(span))
            done[prefix, suffix, span] = engine.run([request])[0]
        return done[prefix, suffix, span]

    return result


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


def after_each_step(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, hook: Callable[[int], None]
) -> None:
    """Call hook(n) on the scheduler's worker right after the n-th step of its running batch
    (before the scheduler counts the step and hands out results): the test decides what the
    worker does next, and when. Only the first live batch is hooked (the scheduler's, built as
    its worker starts); `Engine.run`'s batches step as they are."""
    real, made = engine.live_batch, itertools.count()

    def live_batch() -> Any:
        batch = real()
        if next(made):
            return batch
        step, steps = batch.step, itertools.count(1)

        def stepped(*args: Any) -> Any:
            ended = step(*args)
            hook(next(steps))
            return ended

        batch.step = stepped  # type: ignore[method-assign]
        return batch

    monkeypatch.setattr(engine, "live_batch", live_batch)


class Clock:
    """The scheduler's clock (`time.monotonic`), moved only by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(scheduler_module, "time", c)
    return c


def test_requests_waiting_together_share_passes(
    engine: Engine, recorder: Recorder, alone: Alone
) -> None:
    with Scheduler(engine.live_batch, max_batch=8, start=False, on_join=recorder) as s:
        spans = [8, 12, 16, 8]
        tickets = [s.submit_request(engine.request(PREFIX, SUFFIX, fixed(n))) for n in spans]
        s.start()
        results = [t.result(60) for t in tickets]
        stats = s.stats()
    assert recorder.sizes == [4]  # all four joined at once and shared the forward passes
    # 16 steps; each step's rows: 4 for 8 steps, then 2 (the 12 and the 16), then 1
    assert stats["steps"] == 16 and stats["row_steps"] == sum(spans) and stats["done"] == 4
    assert [r.nfe for r in results] == spans and all(t.batch_size == 4 for t in tickets)
    # greedy: a batched request decodes exactly what it decodes alone
    reference = alone(PREFIX, SUFFIX, 12)
    assert results[1].text == reference.text and results[1].token_ids == reference.token_ids


def test_a_request_joins_the_running_batch_at_the_next_step(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, alone: Alone
) -> None:
    """Continuous batching: a request that arrives while another decodes does not wait for it
    to end; it joins at the next step, decodes what it decodes alone, and leaves when done."""
    in_third, go_on = threading.Event(), threading.Event()

    def hold_third(n: int) -> None:  # the short request arrives during the third step
        if n == 3:
            in_third.set()
            go_on.wait(30)

    after_each_step(engine, monkeypatch, hold_third)
    joined_at: list[int] = []
    with Scheduler(engine.live_batch, max_batch=8) as s:
        s.on_join = lambda tickets: joined_at.append(s.stats()["steps"])
        long = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(48)))
        try:
            assert in_third.wait(30)
            short = s.submit_request(engine.request("x = [1, 2", "]\n", fixed(8)))
        finally:
            go_on.set()
        r_short = short.result(60)
        assert not long.done()  # the short one ended first, inside the long one's decode
        r_long = long.result(60)
        stats = s.stats()
    assert joined_at == [0, 3]  # the step after the one it arrived in
    assert short.batch_size == 2 and r_short.nfe == 8 and r_long.nfe == 48
    assert stats["steps"] == 48 and stats["row_steps"] == 56  # 8 steps had both rows
    assert r_short.token_ids == alone("x = [1, 2", "]\n", 8).token_ids
    # the join left the running row untouched
    assert r_long.token_ids == alone(PREFIX, SUFFIX, 48).token_ids


def test_requests_join_up_to_max_batch_highest_priority_first_fifo_within(
    engine: Engine, recorder: Recorder
) -> None:
    with Scheduler(engine.live_batch, max_batch=2, start=False, on_join=recorder) as s:
        order = ["command", "automatic", "invoked", "automatic", "invoked", "command"]
        tickets: dict[InfillRequest, tuple[int, str]] = {}
        for i, priority in enumerate(order):
            t = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)), priority=priority)  # type: ignore[arg-type]
            tickets[t.request] = (i, priority)
        s.start()
        wait_until(lambda: s.stats()["done"] == len(order))
    joins = [[tickets[r] for r in rnd] for rnd in recorder.joins]
    assert joins == [
        [(2, "invoked"), (4, "invoked")],
        [(1, "automatic"), (3, "automatic")],
        [(0, "command"), (5, "command")],
    ]


@pytest.mark.parametrize(("waited", "first"), [(2.5, "command"), (1.5, "invoked")])
def test_a_waiting_request_rises_a_level_every_age_s(
    engine: Engine, recorder: Recorder, clock: Clock, waited: float, first: str
) -> None:
    """Aging: a command that has waited two `age_s` ranks with invoked completions and, being
    older, goes first; one that has waited less than two still ranks below them (one level up
    is automatic's), and the completions keep going ahead of it."""
    age_s = 10.0
    with Scheduler(engine.live_batch, max_batch=1, start=False, on_join=recorder, age_s=age_s) as s:
        command = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)), priority="command")
        clock.advance(waited * age_s)  # the scheduler's clock alone moves: nothing sleeps
        invoked = [
            s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)), priority="invoked")
            for _ in range(3)
        ]
        s.start()
        wait_until(lambda: s.stats()["done"] == 4)
    order = [r[0] for r in recorder.joins]
    assert (order.index(command.request) == 0) == (first == "command")
    assert order[-1] is (invoked[-1].request if first == "command" else command.request)
    with pytest.raises(ValueError, match="age_s"):
        Scheduler(engine.live_batch, age_s=0)


def test_a_full_queue_raises_busy(engine: Engine) -> None:
    with Scheduler(engine.live_batch, max_queue=2, start=False) as s:
        s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
        s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
        with pytest.raises(Busy, match="queue is full"):
            s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
        assert s.stats()["busy"] == 1 and s.stats()["queued"] == 2


def test_a_request_past_its_deadline_before_it_starts_fails(
    engine: Engine, recorder: Recorder
) -> None:
    with Scheduler(engine.live_batch, start=False, on_join=recorder) as s:
        late = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)), deadline_s=0.05)
        on_time = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)), deadline_s=60)
        # it fails when its deadline passes, not when a worker gets to it
        with pytest.raises(DeadlineExceeded, match="deadline"):
            late.result(10)
        assert s.stats()["expired"] == 1 and s.stats()["queued"] == 1
        s.start()
        assert on_time.result(60).stop_reason == "span_full"
    assert recorder.sizes == [1] and recorder.joins[0][0] is on_time.request


def test_a_deadline_fails_on_time_while_the_batch_runs(engine: Engine) -> None:
    """The worker is held inside its batch (in the on_join hook, before the long request's
    first step) until the waiting request has failed: its deadline was enforced while the
    batch ran, not when the worker got round to it."""
    busy, go_on = threading.Event(), threading.Event()

    def hold(tickets: list[Ticket]) -> None:
        busy.set()
        go_on.wait(30)

    with Scheduler(engine.live_batch, max_batch=1, on_join=hold) as s:
        long = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(96)))
        try:
            assert busy.wait(30)
            waiting = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)), deadline_s=0.05)
            with pytest.raises(DeadlineExceeded, match="deadline passed"):
                waiting.result(10)
            assert long.state == "running" and not long.done()
            assert s.stats()["expired"] == 1 and s.stats()["steps"] == 0
        finally:
            go_on.set()
        s.cancel(long)


def test_cancelling_a_queued_request_means_it_never_starts(
    engine: Engine, recorder: Recorder
) -> None:
    with Scheduler(engine.live_batch, start=False, on_join=recorder) as s:
        a = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
        b = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
        assert s.cancel(a)
        with pytest.raises(Cancelled):
            a.result(1)  # at once, not when the worker gets to it
        assert s.stats()["queued"] == 1
        s.start()
        assert b.result(60).stop_reason == "span_full"
        assert s.stats()["cancelled"] == 1
    assert recorder.sizes == [1] and recorder.joins[0][0] is b.request


def test_cancelling_a_running_request_stops_it_at_its_next_step(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    cancelled: list[bool] = []

    def cancel_after_tenth(n: int) -> None:  # on the worker, between two steps
        if n == 10:
            cancelled.append(s.cancel(long))

    after_each_step(engine, monkeypatch, cancel_after_tenth)
    with Scheduler(engine.live_batch, start=False) as s:
        long = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(256)))
        short = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
        s.start()
        r = long.result(60)
        assert cancelled == [True]  # it was running when cancelled
        assert r.stop_reason == "cancelled" and r.nfe == 10  # not one pass after the cancel
        assert short.result(30).stop_reason == "span_full"
        wait_until(lambda: s.stats()["running"] == 0)
        stats = s.stats()
    assert stats["cancelled"] == 1 and stats["done"] == 1


def test_the_request_s_own_event_cancels_it_too(engine: Engine) -> None:
    event = threading.Event()
    with Scheduler(engine.live_batch, start=False) as s:
        t = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8), cancel=event))
        event.set()
        s.start()
        with pytest.raises(Cancelled):
            t.result(30)


def test_close_cancels_queued_and_running(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    second = threading.Event()

    def hold_second(n: int) -> None:  # close() comes during the second step
        if n == 2:
            second.set()
            running.cancel_event.wait(30)  # close() flags the running request, then joins

    after_each_step(engine, monkeypatch, hold_second)
    s = Scheduler(engine.live_batch, max_batch=1)
    running = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(256)))
    queued = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
    assert second.wait(30)
    s.close()
    r = running.result(10)
    assert r.stop_reason == "cancelled" and r.nfe == 2
    with pytest.raises(Cancelled):
        queued.result(10)
    after = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
    with pytest.raises(Cancelled, match="closed"):
        after.result(1)


def test_a_request_the_engine_cannot_run_is_refused_or_fails_alone(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    too_long = engine.args.max_positions + 1
    with (
        Scheduler(engine.live_batch, check=engine.rows.check) as s,
        pytest.raises(ValueError, match="positions"),
    ):
        s.submit_request(
            engine.request(PREFIX, SUFFIX, InfillParams(span=too_long, max_span=too_long))
        )
    real = engine.rows.row

    def flaky(request: InfillRequest) -> Any:
        if request.params.seed == 666:
            raise ValueError("boom")
        return real(request)

    monkeypatch.setattr(engine.rows, "row", flaky)
    with Scheduler(engine.live_batch, start=False) as s:
        bad = s.submit_request(engine.request(PREFIX, SUFFIX, InfillParams(span=8, seed=666)))
        good = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
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
    with Scheduler(engine.live_batch, start=False) as s:
        a, b = (
            s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8))),
            s.submit_request(engine.request(PREFIX, SUFFIX, fixed(12))),
        )
        s.start()
        for t in (a, b):
            with pytest.raises(RuntimeError, match="out of memory"):
                t.result(30)
        after = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
        assert after.result(30).stop_reason == "span_full"  # a fresh batch, a fresh cache
        stats = s.stats()
    assert stats["failed"] == 2 and stats["done"] == 1 and stats["running"] == 0


def test_tickets_report_queue_time(engine: Engine, clock: Clock) -> None:
    with Scheduler(engine.live_batch, start=False) as s:
        t: Ticket = s.submit_request(engine.request(PREFIX, SUFFIX, fixed(8)))
        clock.advance(0.03)
        assert t.queue_ms == pytest.approx(30.0)  # still waiting: up to now
        clock.advance(0.02)
        s.start()
        t.result(30)
        clock.advance(5.0)  # after it started, the wait no longer grows
    assert t.queue_ms == pytest.approx(50.0)
