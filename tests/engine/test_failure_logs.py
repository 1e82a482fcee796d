"""No failure hides: a model failure is logged with its traceback where it happens (scheduler,
service, language-server backend), and a corrupt span table is a warning, not a quiet fallback."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infill_engine import Engine, InfillParams, load, planner
from infill_engine.scheduler import Scheduler
from infill_engine.service import Address, Service, ServiceClient, ServiceThread
from lsp_server.engines.backend import Backend
from lsp_server.options import EngineOptions

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n"


class Boom(Exception):
    """An error type nobody catches by name."""


@pytest.fixture
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")  # its own: the tests break it on purpose
    yield e
    e.close()


def tracebacks(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == logger and r.levelno >= logging.WARNING and r.exc_info is not None
    ]


def test_a_failed_step_is_logged_with_its_traceback(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_: Any) -> None:
        raise Boom("the device fell over")

    real = engine.runner.step
    engine.runner.step = broken  # type: ignore[method-assign]
    with Scheduler(engine.live_batch) as s:
        with pytest.raises(Boom):
            s.submit_request(engine.request(PREFIX, SUFFIX, InfillParams(span=4))).result(60)
        (record,) = tracebacks(caplog, "infill_engine.scheduler")
        assert record.levelno == logging.ERROR and record.exc_info is not None
        assert record.exc_info[0] is Boom
        engine.runner.step = real  # type: ignore[method-assign]
        assert (
            s.submit_request(engine.request(PREFIX, SUFFIX, InfillParams(span=4))).result(60).tokens
            > 0
        )


def test_a_service_failure_is_logged_with_its_traceback(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_: Any, **__: Any) -> None:
        raise Boom("refine fell over")

    engine.remask = broken  # type: ignore[method-assign]  # the service scores through it
    path = str(tmp_path / "s.sock")
    with (
        ServiceThread(
            Service(engine, "builtin", scheduler=Scheduler(engine.live_batch)),
            Address("unix", path=path),
        ),
        ServiceClient(f"unix:{path}") as c,
    ):
        reply = c.call("refine", prefix=PREFIX, text="a + b", suffix=SUFFIX)
        assert reply["error"]["code"] == "internal" and "Boom" in reply["error"]["message"]
    (record,) = tracebacks(caplog, "infill_engine.service")
    assert record.exc_info is not None and record.exc_info[0] is Boom


def test_a_load_that_fails_in_any_way_ends_failed_and_is_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any, **__: Any) -> None:
        raise Boom("out of file handles")

    monkeypatch.setattr("infill_engine.load", broken)  # the backend imports it when it loads
    backend = Backend(lambda _: None)
    asyncio.run(backend.load(EngineOptions(device="cpu"), lambda _: None))
    assert backend.state == "failed" and backend.error == "Boom: out of file handles"
    (record,) = tracebacks(caplog, "dllm-infill-ls.backend")
    assert record.exc_info is not None and record.exc_info[0] is Boom


def test_an_unusable_span_table_is_a_warning_and_keeps_its_good_rows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text("{ not json")
    caplog.set_level(logging.WARNING, "infill_engine.planner")
    assert planner.load_table(bad) == {}
    assert any("broken.json" in r.getMessage() for r in caplog.records)
    caplog.clear()
    good = {"ratio": 1.5, "ratio_hi": 4.0, "default": 12, "default_hi": 40}
    partial = tmp_path / "partial.json"
    kinds = {"line": good, "statement": {**good, "ratio": "x"}, "expression": 3}
    partial.write_text(json.dumps({"kinds": kinds}))
    table = planner.load_table(partial)
    assert table == {"line": {k: float(v) for k, v in good.items()}}
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "'statement'" in warned and "'expression'" in warned and "'line'" not in warned
    assert set(planner.load_table()) >= {"line", "statement", "expression"}  # the shipped one
