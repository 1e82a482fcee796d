"""Engines that misbehave on purpose, for the replica tests and `bench-ray`: a step that hangs
for ever once a trigger file appears (the first replica whose step claims the file hangs, the
others go on), and steps slowed by a fixed delay (long enough to hang up in the middle)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from infill_engine.deploy.spec import ReplicaSpec, load_engine
from infill_engine.engine import Engine


@dataclass(frozen=True)
class FaultyLoader:
    """A replica loader (deploy/replica.py) whose engine's batch has the faults."""

    hang_trigger: str | None = None
    hang_s: float | None = None  # how long the hang lasts; None: for ever
    step_delay_s: float = 0.0

    def __call__(self, spec: ReplicaSpec) -> Engine:
        engine = load_engine(spec)
        make = engine.live_batch
        setattr(engine, "live_batch", lambda: FaultyBatch(make(), self))  # noqa: B010
        return engine


class FaultyBatch:
    """A live batch whose `step` first applies the faults."""

    def __init__(self, batch: Any, faults: FaultyLoader) -> None:
        self._batch = batch
        self._faults = faults

    def __len__(self) -> int:
        return len(self._batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._batch, name)

    def step(self) -> Any:
        trigger = self._faults.hang_trigger
        if trigger is not None and _claim(trigger):
            threading.Event().wait(self._faults.hang_s)  # wedged: None never returns
        if self._faults.step_delay_s:
            time.sleep(self._faults.step_delay_s)
        return self._batch.step()


def _claim(path: str) -> bool:
    """True for the one caller that removes the file (replicas are separate processes)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        return True
    return False
