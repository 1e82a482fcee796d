"""`LiveBatch`: requests decoding together on one engine, joining and leaving between steps; the
scheduler's running batch, over the runner's `Batch` of rows. Requests become rows and rows
become results through the engine's own functions; each step holds the engine's lock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .params import InfillResult
from .request import InfillRequest
from .runner import Batch, BlockRunner, Row


class LiveBatch:
    """Requests decoding together on one engine, joining and leaving between steps: the
    scheduler's running batch. Keys are the caller's (the scheduler's tickets). Each step holds
    the engine's lock, so a private `run` or a refine's scoring pass takes turns with it."""

    def __init__(
        self,
        runner: BlockRunner,
        lock: threading.Lock,
        to_row: Callable[[InfillRequest], Row],
        to_result: Callable[[Row, InfillRequest], InfillResult],
    ) -> None:
        self._lock = lock  # the engine's: one step (or scoring pass) at a time on its model
        self._to_row, self._to_result = to_row, to_result
        self._batch: Batch = runner.batch()
        self._rows: dict[int, tuple[Any, InfillRequest]] = {}  # id(row) -> key, request
        self._ready: list[tuple[Any, InfillResult]] = []  # ended without a pass

    def __len__(self) -> int:
        return len(self._batch) + len(self._ready)

    @property
    def nbytes(self) -> int:
        """The K/V cache's bytes now (0 once every row has left)."""
        return self._batch.cache.nbytes

    def join(self, key: Any, request: InfillRequest) -> None:
        """Add a request before the next step; raises ValueError for one the engine cannot
        run (it never takes a slot)."""
        row = self._to_row(request)
        with self._lock:
            ended = self._batch.admit([row])
        if ended:
            self._ready.append((key, self._to_result(row, request)))
        else:
            self._rows[id(row)] = (key, request)  # the batch holds the row while it lives

    def step(self) -> list[tuple[Any, InfillResult | Exception]]:
        """One step of every request; the keys and outcomes of those that ended: a result, or
        the error that failed that request alone (its stop rule raised or ran too long)."""
        out: list[tuple[Any, InfillResult | Exception]] = list(self._ready)
        self._ready = []
        if len(self._batch):
            with self._lock:
                ended = self._batch.step()
            for row in ended:
                key, request = self._rows.pop(id(row))
                try:
                    out.append((key, self._to_result(row, request)))
                except Exception as e:
                    out.append((key, e))
        return out

    def fail(self) -> list[Any]:
        """Drop every request (the model raised): their keys; the cache is freed."""
        keys = [key for key, _ in (*self._rows.values(), *self._ready)]
        self._rows, self._ready = {}, []
        self._batch.close()
        return keys
