"""`Scheduler`: many callers, one running batch. A bounded priority queue and one worker thread.

The scheduler owns the queue and never touches a tensor, nor knows what decodes: it is given a
batch factory (a callable that makes a `batch.LiveBatch`; whoever owns the model owns the
scheduler too), and its worker keeps the one running batch it makes and loops: before every
step, waiting requests join it, up to `max_batch` rows (the highest priority first, first come
first served within a priority); then one step runs for every row; rows that ended in it leave,
and their results go to their callers.
This is *continuous batching at step granularity*: a request that arrives while others decode
starts at the next step instead of waiting for them to end, and a short request leaves its slot
the moment it ends. A joining request costs its own full pass in that step (its block starts);
the rows already inside take their window passes beside it.

Deadlines bound the *wait*: a request still queued when its deadline passes fails with
`DeadlineExceeded` (a reaper thread fails it on time, even while the batch runs); a request that
has started runs to its end unless it is cancelled. A cancelled request leaves at its next step,
and its cache slot is freed at once.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .params import InfillResult
from .request import InfillRequest

log = logging.getLogger(__name__)

Priority = Literal["invoked", "automatic", "command"]
# lower runs first: a completion the user asked for, then as-you-type ghost text, then commands
# (a request that waits rises a level every `Scheduler.age_s`)
PRIORITIES: dict[str, int] = {"invoked": 0, "automatic": 1, "command": 2}
MAX_QUEUE = 64  # requests waiting, at most: past it a request is refused (`Busy`)
MAX_BATCH = 8  # rows decoded together in one step

TicketState = Literal["queued", "running", "done"]
Progress = Callable[[str], None]  # a fill's leading text so far (batch.Progress)


class SchedulerError(Exception):
    """A request the scheduler did not run to its end. `code` names it on the wire."""

    code = "internal"


class Busy(SchedulerError):
    """The queue is full: try again later."""

    code = "busy"


class DeadlineExceeded(SchedulerError):
    """The request's deadline passed before it started."""

    code = "deadline"


class Cancelled(SchedulerError):
    """The request was cancelled before it started (or the scheduler closed)."""

    code = "cancelled"


class BatchLike(Protocol):
    """What the scheduler uses of its running batch (`batch.LiveBatch`)."""

    def __len__(self) -> int: ...
    def join(self, key: Any, request: InfillRequest, progress: Progress | None) -> None: ...
    def step(self) -> list[tuple[Any, InfillResult | Exception]]: ...
    def fail(self) -> list[Any]: ...
    @property
    def nbytes(self) -> int: ...


BatchFactory = Callable[[], BatchLike]  # called once, on the worker, as it starts
Check = Callable[[InfillRequest], None]  # raises ValueError for a request no batch can run


@dataclass(eq=False)
class Ticket:
    """A submitted request: its future, its cancel flag and where it stands."""

    id: int
    priority: int
    request: InfillRequest
    cancel_event: threading.Event
    submitted: float  # time.monotonic()
    deadline: float | None  # time.monotonic() after which it may no longer start
    future: Future[InfillResult] = field(default_factory=Future)
    state: TicketState = "queued"
    started: float | None = None
    batch_size: int = 0  # the most requests that shared a step with it, itself included
    progress: Progress | None = None  # on the worker: the fill's leading text as blocks finish

    def result(self, timeout: float | None = None) -> InfillResult:
        """The result; raises `Cancelled`, `DeadlineExceeded` or the batch's error."""
        return self.future.result(timeout)

    def done(self) -> bool:
        return self.future.done()

    @property
    def queue_ms(self) -> float:
        end = self.started if self.started is not None else time.monotonic()
        return (end - self.submitted) * 1000


def settled(ticket: Ticket, timeout: float | None = None) -> InfillResult:
    """A ticket's result, where one cancelled before it joined the batch (it ran no pass) is
    an empty "cancelled" result, as one cancelled while running reads."""
    try:
        return ticket.result(timeout)
    except Cancelled:
        return InfillResult("", 0, 0, 0, 0.0, "cancelled")


@dataclass
class Stats:
    queued: int = 0  # waiting now
    running: int = 0  # in the running batch now
    submitted: int = 0
    done: int = 0  # ran to a result (stop_reason other than "cancelled")
    cancelled: int = 0  # cancelled while queued or while running
    expired: int = 0  # deadline passed while queued
    busy: int = 0  # rejected on a full queue
    failed: int = 0  # the batch raised (joining, or in a step)
    joined: int = 0  # requests that joined the running batch
    steps: int = 0  # steps of the running batch
    row_steps: int = 0  # requests in each step, summed over steps
    passes: int = 0  # forward passes of the requests that ran (each row's nfe, summed)
    cache_bytes: int = 0  # the running batch's K/V cache now

    @property
    def mean_batch(self) -> float:
        """Requests per step: how many shared each step's passes, on average."""
        return self.row_steps / self.steps if self.steps else 0.0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.__dict__)
        out["mean_batch"] = round(self.mean_batch, 3)
        return out


class Scheduler:
    """Queue requests and run them in one batch of up to `max_batch` rows that they join and
    leave between steps; `make_batch` makes that batch, `check` refuses a request no batch can
    run before it is queued.

    `start=False` creates it paused: requests queue until `start()` (tests, warm-up)."""

    def __init__(
        self,
        make_batch: BatchFactory,
        max_queue: int = MAX_QUEUE,
        max_batch: int = MAX_BATCH,
        start: bool = True,
        on_join: Callable[[list[Ticket]], None] | None = None,
        age_s: float = 2.0,
        check: Check | None = None,
    ) -> None:
        if max_queue < 1 or max_batch < 1:
            raise ValueError("max_queue and max_batch must be >= 1")
        if not age_s > 0:
            raise ValueError("age_s must be > 0")
        self.make_batch = make_batch
        self.check = check
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.age_s = age_s  # seconds of waiting that raise a request one priority level
        self.on_join = on_join  # called on the worker as requests join (tests, logging)
        self._cond = threading.Condition()
        self._queue: list[Ticket] = []  # waiting, in arrival order
        self._seq = itertools.count()
        self._running: list[Ticket] = []
        self._batch: BatchLike | None = None  # the worker's running batch, once it started
        self._busy_since: float | None = None  # when the worker's current join-and-step began
        self._stats = Stats()
        self._closed = False
        self._worker = threading.Thread(target=self._work, name="dllm-scheduler", daemon=True)
        self._reaper = threading.Thread(target=self._reap, name="dllm-deadlines", daemon=True)
        self._started = False
        self._reaper.start()  # deadlines run out even while paused
        if start:
            self.start()

    # -- callers ----------------------------------------------------------------------------------
    def start(self) -> None:
        with self._cond:
            if self._started:
                return
            self._started = True
        self._worker.start()

    def submit_request(
        self,
        request: InfillRequest,
        *,
        priority: Priority = "automatic",
        deadline_s: float | None = None,
        progress: Progress | None = None,
    ) -> Ticket:
        """Queue an encoded request. Raises `Busy` on a full queue, `ValueError` on a request
        the batch cannot run. Its `cancel` event (one is added when it has none) is the ticket's:
        setting it has the effect of `cancel(ticket)`; `progress` is the ticket's."""
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {tuple(PRIORITIES)}, got {priority!r}")
        if deadline_s is not None and math.isnan(deadline_s):
            raise ValueError("deadline_s must be a number")
        if self.check is not None:
            self.check(request)
        if request.cancel is None:
            request = dataclasses.replace(request, cancel=threading.Event())
        assert request.cancel is not None
        now = time.monotonic()
        ticket = Ticket(
            id=0,
            priority=PRIORITIES[priority],
            request=request,
            cancel_event=request.cancel,
            submitted=now,
            deadline=None if deadline_s is None else now + max(0.0, deadline_s),
            progress=progress,
        )
        with self._cond:
            if self._closed:
                self._resolve(ticket, Cancelled("the scheduler is closed"))
                return ticket
            if len(self._queue) >= self.max_queue:
                self._stats.busy += 1
                raise Busy(f"the queue is full ({self.max_queue} waiting); try again later")
            seq = next(self._seq)
            ticket.id = seq
            self._stats.submitted += 1
            if ticket.cancel_event.is_set():
                self._stats.cancelled += 1
                self._resolve(ticket, Cancelled("cancelled before it was queued"))
                return ticket
            self._queue.append(ticket)
            self._cond.notify_all()
        return ticket

    def cancel(self, ticket: Ticket) -> bool:
        """Cancel a request: a queued one never starts (its future raises `Cancelled` now), a
        running one leaves its batch before its next step (its result has stop_reason
        "cancelled"). False when it had already finished."""
        ticket.cancel_event.set()
        with self._cond:
            if ticket.state == "queued" and not ticket.done():
                self._drop(ticket)
                self._stats.cancelled += 1
                self._resolve(ticket, Cancelled("cancelled while queued"))
                self._cond.notify_all()
                return True
            return ticket.state == "running"

    def stats(self) -> dict[str, Any]:
        with self._cond:
            self._stats.queued = len(self._queue)
            self._stats.running = len(self._running)
            self._stats.cache_bytes = self._batch.nbytes if self._batch is not None else 0
            return self._stats.as_dict()

    def busy_s(self) -> float:
        """Seconds the worker has spent in its current join-and-step (0 between steps): a step
        takes milliseconds, so seconds here mean a wedged model (health checks read it)."""
        since = self._busy_since
        return 0.0 if since is None else time.monotonic() - since

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def alive(self) -> bool:
        """The worker runs (or has not been started yet) and the scheduler is open."""
        return not self._closed and (not self._started or self._worker.is_alive())

    def close(self, timeout: float | None = 30.0) -> None:
        """Cancel everything (queued requests fail with `Cancelled`, running ones stop at their
        next step) and stop the threads."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            for ticket in self._queue:
                ticket.cancel_event.set()
                self._stats.cancelled += 1
                self._resolve(ticket, Cancelled("the scheduler closed"))
            self._queue.clear()
            for ticket in self._running:
                ticket.cancel_event.set()
            self._cond.notify_all()
        for thread in (self._worker, self._reaper):
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout)

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the worker -------------------------------------------------------------------------------
    def _take(self) -> list[Ticket] | None:
        """Before a step: the tickets that join now (up to the batch's free rows; empty while
        it is full), waiting while there is nothing to run; None once closed and drained."""
        with self._cond:
            while True:
                joining: list[Ticket] = []
                now = time.monotonic()
                while (
                    not self._closed
                    and self._queue
                    and len(self._running) + len(joining) < self.max_batch
                ):
                    ticket = min(self._queue, key=lambda t: self._rank(t, now))
                    self._queue.remove(ticket)
                    if ticket.cancel_event.is_set():  # flagged through its own event
                        self._stats.cancelled += 1
                        self._resolve(ticket, Cancelled("cancelled while queued"))
                    elif ticket.deadline is not None and now > ticket.deadline:
                        self._expire(ticket)
                    else:
                        joining.append(ticket)
                for ticket in joining:
                    ticket.state, ticket.started = "running", now
                self._running.extend(joining)
                self._stats.joined += len(joining)
                if self._running:
                    return joining
                if self._closed:
                    return None
                self._cond.wait()

    def _work(self) -> None:
        batch = self._batch = self.make_batch()
        while (joining := self._take()) is not None:
            self._busy_since = time.monotonic()
            try:
                self._step(batch, joining)
            finally:
                self._busy_since = None

    def _step(self, batch: BatchLike, joining: list[Ticket]) -> None:
        """The joining tickets join the batch, then one step of every row."""
        for ticket in joining:
            try:
                batch.join(ticket, ticket.request, ticket.progress)
            except ValueError as e:  # a request the batch cannot run: the caller is told
                self._finish(ticket, e)
            except Exception as e:  # this request alone: it never takes a slot
                log.error("request %d failed to join the batch", ticket.id, exc_info=e)
                self._finish(ticket, e)
        if joining and self.on_join is not None:
            self.on_join(joining)
        with self._cond:
            rows = len(self._running)
            for ticket in self._running:
                ticket.batch_size = max(ticket.batch_size, rows)
        if not rows:
            return
        try:
            ended = batch.step()
        except Exception as e:  # the model failed mid-step: every row in it fails
            failed = batch.fail()
            log.error("a step failed; its %d requests fail", len(failed), exc_info=e)
            for ticket in failed:
                self._finish(ticket, e)
            return
        with self._cond:
            self._stats.steps += 1
            self._stats.row_steps += rows
        for ticket, outcome in ended:
            if isinstance(outcome, Exception):  # its own rule failed: it alone ends
                log.warning("request %d failed alone", ticket.id, exc_info=outcome)
            self._finish(ticket, outcome)

    def _finish(self, ticket: Ticket, outcome: InfillResult | BaseException) -> None:
        with self._cond:
            if isinstance(outcome, BaseException):
                self._stats.failed += 1
            else:
                self._stats.passes += outcome.nfe
                if outcome.stop_reason == "cancelled":
                    self._stats.cancelled += 1
                else:
                    self._stats.done += 1
            self._running = [t for t in self._running if t is not ticket]
            self._resolve(ticket, outcome)

    def _reap(self) -> None:
        """Fail queued requests whose deadline passed, on time even while the batch runs."""
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                due = [t for t in self._queue if t.deadline is not None and now > t.deadline]
                for ticket in due:
                    self._drop(ticket)
                    self._expire(ticket)
                deadlines = [t.deadline for t in self._queue if t.deadline is not None]
                wait = max(0.0, min(deadlines) - now) + 0.001 if deadlines else None
                self._cond.wait(wait)

    # -- helpers (under the lock) -----------------------------------------------------------------
    def _rank(self, ticket: Ticket, now: float) -> tuple[int, int]:
        """Priority first, arrival within a priority; every `age_s` a request waits raises it
        one level, so a command cannot starve under a steady stream of completions."""
        waited = now - ticket.submitted
        return ticket.priority - int(waited // self.age_s), ticket.id

    def _drop(self, ticket: Ticket) -> None:
        self._queue = [t for t in self._queue if t is not ticket]

    def _expire(self, ticket: Ticket) -> None:
        self._stats.expired += 1
        waited = (time.monotonic() - ticket.submitted) * 1000
        self._resolve(ticket, DeadlineExceeded(f"the deadline passed after {waited:.0f} ms queued"))

    @staticmethod
    def _resolve(ticket: Ticket, outcome: InfillResult | BaseException) -> None:
        ticket.state = "done"
        try:
            if isinstance(outcome, BaseException):
                ticket.future.set_exception(outcome)
            else:
                ticket.future.set_result(outcome)
        except InvalidStateError:  # the caller cancelled the future itself
            pass
