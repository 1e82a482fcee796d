"""The engine's facade: one scheduler per engine, shared by every caller (the serve command's
and a service's included), sized once; the scheduler is made on the engine's batch factory."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from infill_engine import InfillParams, load
from infill_engine.scheduler import MAX_BATCH, MAX_QUEUE, Scheduler
from infill_engine.service import Service


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


def test_a_service_runs_on_the_engines_own_scheduler_and_a_closed_one_is_replaced() -> None:
    engine = load("builtin", device="cpu")
    try:
        service = Service(engine, "builtin")
        assert service.scheduler is engine.scheduler()
        service.shutdown()  # closes the engine's scheduler with it
        fresh = engine.scheduler()
        assert fresh is not service.scheduler and fresh.alive and not fresh.closed
        assert engine.infill("def f(x):\n    return ", "\n", InfillParams(span=4)).tokens > 0
    finally:
        engine.close()


def test_a_closed_scheduler_is_replaced_with_other_sizes() -> None:
    """bench-serve compares batch sizes on one engine: a service on the engine's scheduler of
    one size, shut down (its scheduler closed), then one of the next size; the runtime
    scheduler has no resize of its own."""
    engine = load("builtin", device="cpu")
    params = InfillParams(span=4, threshold=1.5, min_tokens=4)
    try:
        one = engine.scheduler(max_batch=1)
        assert engine.infill("x = ", "\n", params).tokens == 4
        Service(engine, "builtin").shutdown()  # closes the engine's scheduler
        three = engine.scheduler(max_batch=3)
        assert three is not one and three.max_batch == 3 and one.closed
        assert engine.infill("x = ", "\n", params).tokens == 4
        assert not hasattr(Scheduler, "resize")
    finally:
        engine.close()


def test_only_the_engine_makes_a_scheduler_and_the_scheduler_never_sees_it() -> None:
    """In the runtime packages a `Scheduler` is built in one place, the engine's `scheduler()`
    (bench-serve built two of its own over one engine before), and scheduler.py names no
    engine: it runs whatever batch its factory makes."""
    root = Path(__file__).resolve().parents[2]
    makers = []
    for path in sorted([*root.glob("infill_engine/**/*.py"), *root.glob("lsp_server/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                if name == "Scheduler":
                    makers.append(str(path.relative_to(root)))
    assert makers == ["infill_engine/engine.py"]
    source = (root / "infill_engine" / "scheduler.py").read_text(encoding="utf-8")
    assert "engine" not in source.lower().replace("infill_engine", "")
