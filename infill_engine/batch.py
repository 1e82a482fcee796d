"""`LiveBatch`: requests decoding together on one engine, joining and leaving between steps; the
scheduler's running batch, and `Engine.run`'s, over the runner's `Batch` of rows. Requests
become rows and rows become results through `rows.Rows`; each step holds the engine's lock.

A request may come with a `Progress` listener (a streaming caller's): each time one of its row's
blocks finishes, the listener gets the row's committed leading text so far (`Rows.head`:
the text the result will begin with), only when it grew. A request without one costs nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .params import InfillResult
from .request import InfillRequest
from .rows import Rows
from .runner import Batch, BlockRunner, Observer

log = logging.getLogger("infill_engine.batch")

Progress = Callable[[str], None]  # the leading text of a fill so far; called on the worker


@dataclass
class _Watch:
    """A watched row: its listener, the text it was last given, the block it was in."""

    listener: Progress
    request: InfillRequest
    text: str = ""
    block: int = -1


class LiveBatch:
    """Requests decoding together on one engine, joining and leaving between steps: the
    scheduler's running batch. Keys are the caller's (the scheduler's tickets). Each step holds
    the engine's lock, so another live batch (`Engine.run`'s) or a refine's scoring pass takes
    turns with it step by step."""

    def __init__(
        self,
        runner: BlockRunner,
        lock: threading.Lock,
        rows: Rows,
    ) -> None:
        self._lock = lock  # the engine's: one step (or scoring pass) at a time on its model
        self.rows = rows  # the conversions: request -> row -> result, and a live row's head
        self._batch: Batch = runner.batch()
        self._rows: dict[int, tuple[Any, InfillRequest]] = {}  # id(row) -> key, request
        self._ready: list[tuple[Any, InfillResult]] = []  # ended without a pass
        self._watched: dict[int, _Watch] = {}  # id(row) -> its progress listener

    def __len__(self) -> int:
        return len(self._batch) + len(self._ready)

    @property
    def nbytes(self) -> int:
        """The K/V cache's bytes now (0 once every row has left)."""
        return self._batch.cache.nbytes

    def join(self, key: Any, request: InfillRequest, progress: Progress | None = None) -> None:
        """Add a request before the next step; raises ValueError for one the engine cannot
        run (it never takes a slot). `progress` hears its leading text as its blocks finish."""
        row = self.rows.row(request)
        with self._lock:
            ended = self._batch.admit([row])
        if ended:
            self._ready.append((key, self.rows.result(row, request)))
        else:
            self._rows[id(row)] = (key, request)  # the batch holds the row while it lives
            if progress is not None:
                self._watched[id(row)] = _Watch(progress, request, block=row.block_start)

    def step(self, observer: Observer | None = None) -> list[tuple[Any, InfillResult | Exception]]:
        """One step of every request; the keys and outcomes of those that ended: a result, or
        the error that failed that request alone (its stop rule raised or ran too long).
        `observer` sees the batch after the step (when one ran: not for rows that ended as
        they joined)."""
        out: list[tuple[Any, InfillResult | Exception]] = list(self._ready)
        self._ready = []
        if len(self._batch):
            with self._lock:
                ended = self._batch.step()
            if observer is not None:
                observer(self._batch.event())
            for row in ended:
                key, request = self._rows.pop(id(row))
                self._watched.pop(id(row), None)
                try:
                    out.append((key, self.rows.result(row, request)))
                except Exception as e:
                    out.append((key, e))
            if self._watched:
                self._report()
        return out

    def _report(self) -> None:
        """Tell each watched live row's listener its leading text, when a block of it finished
        in this step and the text grew (only growing: a listener adds what is new)."""
        for row in self._batch.rows:
            watch = self._watched.get(id(row))
            if watch is None or row.block_start == watch.block:
                continue
            watch.block = row.block_start
            try:
                text = self.rows.head(row, watch.request)
                if len(text) > len(watch.text) and text.startswith(watch.text):
                    watch.text = text
                    watch.listener(text)
            except Exception as e:  # progress is a courtesy: the row decodes on regardless
                log.warning("a progress report failed", exc_info=e)

    def fail(self) -> list[Any]:
        """Drop every request (the model raised): their keys; the cache is freed."""
        keys = [key for key, _ in (*self._rows.values(), *self._ready)]
        self._rows, self._ready, self._watched = {}, [], {}
        self._batch.close()
        return keys
