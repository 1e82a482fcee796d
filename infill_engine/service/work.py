"""One request's work in the engine service, the same for every front (the msgpack connection,
the HTTP routes): its rows are built on the service's encoder thread (tokenizing, planning), queued
on the shared scheduler, and awaited on the event loop. Whatever goes wrong is a `Refusal` with
one of the service's error codes, which each front writes in its own format.

| code          | when                                                   | HTTP |
|---------------|--------------------------------------------------------|------|
| bad_request   | a field the engine cannot run (checked here or by it)  | 400  |
| unauthorized  | no valid token                                         | 401  |
| not_found     | no such route                                          | 404  |
| method_not_allowed | a route asked with the wrong method               | 405  |
| timeout       | headers or a body that did not arrive in time          | 408  |
| too_large     | a body over the limit                                  | 413  |
| busy          | the queue or the in-flight limit is full               | 503  |
| deadline      | the deadline passed before it could start              | 504  |
| cancelled     | the client cancelled it, or went away                  | 499  |
| internal      | the engine failed (its traceback is logged)            | 500  |
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..params import InfillResult
from ..request import InfillRequest
from ..scheduler import Busy, Priority, Scheduler, SchedulerError, Ticket

log = logging.getLogger("infill_engine.service")

HTTP_STATUS = {
    "bad_request": 400,
    "unauthorized": 401,
    "not_found": 404,
    "unknown_method": 404,
    "method_not_allowed": 405,
    "too_large": 413,
    "timeout": 408,
    "cancelled": 499,
    "internal": 500,
    "busy": 503,
    "deadline": 504,
}


class Refusal(Exception):
    """A request that ends in an error reply: `code` is one of the table's."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def status(self) -> int:
        return HTTP_STATUS.get(self.code, 500)

    def body(self) -> dict[str, Any]:
        """The HTTP front's error object (a response body, or a server-sent event)."""
        return {"error": {"code": self.status, "type": self.code, "message": self.message}}


@dataclass
class Pending:
    """A request in flight: its cancel flag (shared by its rows) and its tickets once queued."""

    cancel: threading.Event
    received: float = field(default_factory=time.monotonic)
    tickets: list[Ticket] = field(default_factory=list)

    def stop(self, scheduler: Scheduler) -> None:
        """Cancel it: queued rows leave the queue, running ones stop at their next step; rows
        still being built are cancelled as soon as they are queued."""
        self.cancel.set()
        for ticket in self.tickets:
            scheduler.cancel(ticket)


Build = Callable[[threading.Event], Sequence[InfillRequest]]
# a streaming caller's: (the row's index, its fill's leading text so far), on the worker thread
Watch = Callable[[int, str], None]


def deadline_s(deadline_ms: float | None, received: float) -> float | None:
    if deadline_ms is None:
        return None
    return deadline_ms / 1000 - (time.monotonic() - received)


async def run_rows(
    scheduler: Scheduler,
    encoder: ThreadPoolExecutor,
    pending: Pending,
    build: Build,
    priority: Priority,
    deadline_ms: float | None = None,
    watch: Watch | None = None,
) -> list[tuple[InfillResult, Ticket]]:
    """Build a request's rows on the encoder thread, queue them, and wait for all of them. Raises
    `Refusal`; a cancelled result is the `cancelled` refusal. If the awaiting task is cancelled
    (its client went away), the rows are cancelled too. `watch` hears each row's leading text
    as its blocks finish (Scheduler.submit_request's `progress`)."""

    def submit() -> list[Ticket]:
        requests = build(pending.cancel)
        tickets: list[Ticket] = []
        left = deadline_s(deadline_ms, pending.received)
        try:
            for i, request in enumerate(requests):
                progress = None if watch is None else functools.partial(watch, i)
                tickets.append(
                    scheduler.submit_request(
                        request, priority=priority, deadline_s=left, progress=progress
                    )
                )
        except BaseException:
            for ticket in tickets:
                scheduler.cancel(ticket)
            raise
        return tickets

    loop = asyncio.get_running_loop()
    try:
        tickets = await loop.run_in_executor(encoder, submit)
    except Busy as e:
        raise Refusal(e.code, str(e)) from None
    except ValueError as e:  # a request the engine or the planner cannot run
        raise Refusal("bad_request", str(e)[:300]) from None
    except Exception as e:  # the encoder pool shut down, a tokenizer failure
        log.error("a request could not be queued", exc_info=e)
        raise Refusal("internal", f"{type(e).__name__}: {e}"[:300]) from None
    pending.tickets = tickets
    if pending.cancel.is_set():  # cancelled (or disconnected) while it was being built
        pending.stop(scheduler)
    try:
        outcomes = await asyncio.gather(
            *(asyncio.wrap_future(t.future) for t in tickets), return_exceptions=True
        )
    except asyncio.CancelledError:
        pending.stop(scheduler)
        raise
    out: list[tuple[InfillResult, Ticket]] = []
    for outcome, ticket in zip(outcomes, tickets, strict=True):
        if isinstance(outcome, SchedulerError):
            raise Refusal(outcome.code, str(outcome))
        if isinstance(outcome, asyncio.CancelledError):
            raise Refusal("cancelled", "cancelled")
        if isinstance(outcome, ValueError):  # refused as it became a row (rows.check)
            raise Refusal("bad_request", str(outcome)[:300])
        if isinstance(outcome, BaseException):
            raise Refusal("internal", f"{type(outcome).__name__}: {outcome}"[:300])
        if outcome.stop_reason == "cancelled":
            raise Refusal("cancelled", f"cancelled after {outcome.nfe} passes")
        out.append((outcome, ticket))
    return out
