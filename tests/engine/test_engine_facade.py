"""The engine's facade: one scheduler per engine, shared by every caller (the serve command's
included), sized once."""

from __future__ import annotations

import pytest

from infill_engine import InfillParams, load
from infill_engine.scheduler import MAX_BATCH, MAX_QUEUE


def test_one_scheduler_per_engine_sized_on_first_use() -> None:
    engine = load("builtin", device="cpu")
    try:
        s = engine.scheduler(max_batch=3)
        assert (s.max_batch, s.max_queue) == (3, MAX_QUEUE)
        assert engine.scheduler() is s and engine.scheduler(max_batch=3) is s
        with pytest.raises(ValueError, match="max_batch=3"):
            engine.scheduler(max_batch=MAX_BATCH)
        r = engine.infill("def f(x):\n    return ", "\n", InfillParams(span=4))
        assert r.tokens > 0 and s.stats()["done"] == 1  # infill went through that scheduler
    finally:
        engine.close()
