"""A refine is a row of the scheduled batch: completions join, run and finish beside it, in the
engine and in the service, and it is cancelled like any other request."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from infill_engine import Engine, InfillParams, load
from infill_engine.engine import RefineResult
from infill_engine.scheduler import PRIORITIES, Scheduler, Ticket, settled
from infill_engine.service import Address, Service, ServiceClient, ServiceThread

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n"
LONG = "x = 1\n" * 60  # every token remasked and one committed per pass: hundreds of steps
ONE_PER_PASS = InfillParams(span=1, threshold=1.5)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


class Joins:
    """The scheduler's on_join hook: each ticket that joined, and an event per priority."""

    def __init__(self) -> None:
        self.tickets: list[Ticket] = []
        self.command = threading.Event()

    def __call__(self, tickets: list[Ticket]) -> None:
        self.tickets.extend(tickets)
        if any(t.priority == PRIORITIES["command"] for t in tickets):
            self.command.set()


def refine_on(
    scheduler: Scheduler, engine: Engine, text: str, fraction: float, cancel: threading.Event | None
) -> RefineResult:
    """A refine whose row joins `scheduler`'s batch, as a service runs one on its own: the
    scoring pass (`Engine.remask`), then its request at command priority."""
    remask = engine.remask(
        PREFIX, text, SUFFIX, fraction=fraction, params=ONE_PER_PASS, cancel=cancel
    )
    return remask.result(settled(scheduler.submit_request(remask.request, priority="command")))


def start_refine(
    engine: Engine, scheduler: Scheduler, cancel: threading.Event
) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def work() -> None:
        try:
            out.append(refine_on(scheduler, engine, LONG, 1.0, cancel))
        except Exception as e:  # reported by the test, not lost on the thread
            out.append(e)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, out


def test_completions_finish_while_a_long_refine_runs(engine: Engine) -> None:
    joins = Joins()
    with Scheduler(engine.live_batch, max_batch=8, on_join=joins) as scheduler:
        cancel = threading.Event()
        thread, out = start_refine(engine, scheduler, cancel)
        assert joins.command.wait(60), "the refine never joined the batch"
        (refine,) = [t for t in joins.tickets if t.priority == PRIORITIES["command"]]
        for _ in range(3):  # each completion runs to its end while the refine is still a row
            ticket = scheduler.submit_request(engine.request(PREFIX, SUFFIX, InfillParams(span=8)))
            assert ticket.result(60).stop_reason != "cancelled"
            assert not refine.done()
        assert scheduler.stats()["mean_batch"] > 1  # they shared steps with it
        cancel.set()
        result = refine.result(60)
        assert result.stop_reason == "cancelled" and result.nfe < len(engine.encode(LONG))
        thread.join(60)  # the refine's caller sees it end too
    (r,) = out
    assert isinstance(r, RefineResult) and r.stop_reason == "cancelled"


def test_a_refine_in_the_batch_edits_as_a_refine_alone(engine: Engine) -> None:
    text = "a +  b"
    with Scheduler(engine.live_batch) as scheduler:
        shared = refine_on(scheduler, engine, text, 0.5, None)
    alone = engine.refine(PREFIX, text, SUFFIX, 0.5, ONE_PER_PASS)  # the engine's own scheduler
    assert (shared.text, shared.remasked, shared.changed, shared.nfe) == (
        alone.text,
        alone.remasked,
        alone.changed,
        alone.nfe,
    )
    assert shared.remasked and len(shared.token_ids) == len(engine.encode(text))


def test_the_service_answers_completions_during_a_refine(engine: Engine, tmp_path: Path) -> None:
    joins = Joins()
    scheduler = Scheduler(engine.live_batch, max_batch=8, on_join=joins)
    path = str(tmp_path / "s.sock")
    with (
        ServiceThread(Service(engine, "builtin", scheduler=scheduler), Address("unix", path=path)),
        ServiceClient(f"unix:{path}") as c,
    ):
        rid = c.request(
            "refine",
            prefix=PREFIX,
            text=LONG,
            suffix=SUFFIX,
            fraction=1.0,
            params={"span": 1, "threshold": 1.5},
        )
        assert joins.command.wait(60), "the refine never joined the batch"
        (refine,) = [t for t in joins.tickets if t.priority == PRIORITIES["command"]]
        for _ in range(3):
            assert c.infill(PREFIX, SUFFIX, {"span": 8})["stop_reason"] != "cancelled"
            assert not refine.done()
        c.cancel(rid)
        assert c.reply(rid)["error"]["code"] == "cancelled"
        assert c.call("health")["result"]["status"] == "ok"
