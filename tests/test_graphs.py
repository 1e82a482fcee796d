"""The bookkeeping of CUDA graphs for window passes, on the CPU: a "capture" that returns the
eager pass itself still goes through every static tensor a real graph reads, so a step input
that is not copied in, or a graph kept past its cache, changes the tokens. (The real capture
runs on a GPU: `dllm-infill bench` there reports its tokens' agreement with the eager run.)"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from infill_engine import Engine, InfillParams
from infill_engine.graphs import Pass, WindowGraphs

PREFIX = "def add(a, b):\n    return"
SUFFIX = "\n\nclass Point:\n"


def same_pass(fn: Pass) -> Pass:
    return fn


@pytest.fixture
def graphs(dream_engine: Engine) -> Iterator[WindowGraphs]:
    g = WindowGraphs(dream_engine.model, same_pass, after=2)
    dream_engine.runner.graphs = g
    yield g
    dream_engine.runner.graphs = None


def test_graphed_window_passes_decode_what_eager_ones_do(
    dream_engine: Engine, graphs: WindowGraphs
) -> None:
    e = dream_engine
    p = InfillParams(span=40, block_size=8, threshold=2.0)  # one token per pass: 35 windows
    reqs = [
        e.request(PREFIX, SUFFIX, p),
        e.request("x = [1, 2", "]\nprint(x)\n", replace(p, span=24, block_size=4)),
        e.request("import os\n", "", replace(p, cache="prefix")),
    ]
    graphed = e.run(reqs)
    assert graphs.captures >= 2 and graphs.replays > 20  # several shapes, replayed many times
    e.runner.graphs = None
    eager = e.run(reqs)
    assert [r.token_ids for r in graphed] == [r.token_ids for r in eager]
    assert [(r.nfe_full, r.nfe_block) for r in graphed] == [
        (r.nfe_full, r.nfe_block) for r in eager
    ]


def test_graphs_are_dropped_when_the_cache_is_replaced(
    dream_engine: Engine, graphs: WindowGraphs
) -> None:
    """A row leaving the batch replaces the cache's tensors: every graph captured on the old
    ones goes (a real graph would write into freed memory), and the decode is unchanged."""
    e = dream_engine
    p = InfillParams(span=32, block_size=8, threshold=2.0)
    reqs = [e.request(PREFIX, SUFFIX, replace(p, span=6)), e.request(PREFIX, SUFFIX, p)]
    batch = e.runner.batch()
    rows = [e._row(r) for r in reqs]
    batch.admit(rows)
    while len(batch) == 2:
        batch.step()
    shapes = set(graphs._graphs)
    assert shapes and all(key[0][0] == 2 for key in shapes)  # captured with both rows
    batch.step()  # a window pass of the row that stays (the short one left mid-block)
    assert graphs._graphs.keys().isdisjoint(shapes)  # the two-row graphs are gone
    while batch:
        batch.step()
    e.runner.graphs = None
    assert [e._result(r, q).token_ids for r, q in zip(rows, reqs, strict=True)] == [
        r.token_ids for r in e.run(reqs)
    ]


def test_a_growing_span_is_replayed_with_its_new_key_mask(
    dream_engine: Engine, graphs: WindowGraphs
) -> None:
    """Growth lengthens a canvas inside the same cache and shapes: only the key mask's contents
    change, and the replay must see them."""
    e = dream_engine
    p = InfillParams(span=8, block_size=8, threshold=2.0)
    req = replace(e.request(PREFIX, SUFFIX, p), max_span=32)

    def decode() -> list[int]:
        row = e._row(req)
        row.stop = lambda ids: None  # a construct that never closes: the span grows to 32
        e.runner.run([row])
        assert row.grown == 24 and row.nfe_block > 20
        return e._result(row, req).token_ids

    graphed = decode()
    assert graphs.replays > 0
    e.runner.graphs = None
    assert graphed == decode()


def test_a_failed_capture_leaves_the_eager_pass(dream_engine: Engine) -> None:
    def broken(fn: Pass) -> Pass:
        raise RuntimeError("capture not supported")

    g = WindowGraphs(dream_engine.model, broken, after=1)
    dream_engine.runner.graphs = g
    try:
        p = InfillParams(span=16, block_size=8, threshold=2.0)
        r = dream_engine.infill(PREFIX, SUFFIX, p)
    finally:
        dream_engine.runner.graphs = None
    assert not g.enabled and g.captures == 0 and g.replays == 0
    assert r.token_ids == dream_engine.infill(PREFIX, SUFFIX, p).token_ids


def test_cpu_engines_never_capture(dream_engine: Engine) -> None:
    assert WindowGraphs.for_device(dream_engine.model) is None


def test_bench_compares_graphed_rows_with_an_eager_twin(
    dream_engine: Engine, graphs: WindowGraphs
) -> None:
    from infill_engine.lab import bench

    rows = bench.run(dream_engine, [24], block_size=8, thresholds=[1.0], context=24)
    assert [r.cache for r in rows] == ["none", "none", "prefix/g", "dual", "dual/g"]
    dual, graphed = rows[3], rows[4]
    assert graphed.vs_eager == 1.0 and graphed.nfe == dual.nfe  # same kernels, same tokens
    assert all(r.vs_eager is None for r in rows[:4])
    assert graphs.replays > 0 and dream_engine.runner.graphs is graphs
    assert "vs eager" in bench.table(rows)
