"""Rows decoded on a runner's own `Batch` until each one ends, no row joining later: for the
tests that set a row's fields by hand (a stop function, a canvas) and read them afterwards.
The engine decodes requests through `LiveBatch` (Engine.run, the scheduler) over the same
`Batch` steps."""

from __future__ import annotations

from infill_engine.row import Observer, Row
from infill_engine.runner import BlockRunner


def decode_rows(runner: BlockRunner, rows: list[Row], observer: Observer | None = None) -> None:
    batch = runner.batch()
    batch.admit(rows)
    while batch:
        batch.step()
        if observer is not None:
            observer(batch.event())
    batch.close()
