"""The bookkeeping of CUDA graphs for window passes, on the CPU: a "capture" that returns the
eager pass itself still goes through every static tensor a real graph reads, so a step input
that is not copied in, or a graph kept past its cache, changes the tokens. The real capture
(`cuda_capture`) is checked where a GPU is: the `gpu` tests, skipped elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from block_loop import decode_rows

from infill_engine import Engine, InfillParams, load
from infill_engine.graphs import Pass, WindowGraphs, WindowPass

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
    rows = [e.rows.row(r) for r in reqs]
    batch.admit(rows)
    while len(batch) == 2:
        batch.step()
    shapes = graphs.shapes
    assert shapes and all(key[0][0] == 2 for key in shapes)  # captured with both rows
    batch.step()  # a window pass of the row that stays (the short one left mid-block)
    assert graphs.shapes.isdisjoint(shapes)  # the two-row graphs are gone
    while batch:
        batch.step()
    e.runner.graphs = None
    assert [e.rows.result(r, q).token_ids for r, q in zip(rows, reqs, strict=True)] == [
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
        row = e.rows.row(req)
        row.stop = lambda ids: None  # a construct that never closes: the span grows to 32
        decode_rows(e.runner, [row])
        assert row.grown == 24 and row.nfe_block > 20
        return e.rows.result(row, req).token_ids

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
    from dllm_lab import bench

    rows = bench.run(dream_engine, [24], block_size=8, thresholds=[1.0], context=24)
    assert [r.cache for r in rows] == ["none", "none", "prefix/g", "dual", "dual/g", "dual+x/g"]
    dual, graphed, exact = rows[3], rows[4], rows[5]
    assert graphed.vs_eager == 1.0 and graphed.nfe == dual.nfe  # same kernels, same tokens
    assert exact.vs_eager == 1.0 and exact.nfe <= dual.nfe  # the exact mode: the same tokens
    assert all(r.vs_eager is None for r in rows[:4])
    assert graphs.replays > 0 and dream_engine.runner.graphs is graphs
    assert "vs eager" in bench.table(rows)


# -- the bookkeeping alone: a stand-in model and cache --------------------------------------------
class Model:
    """Logits that are a function of every input a window pass reads."""

    def __call__(self, ids: Any, positions: Any, *, mask: Any, store: Any, score: Any) -> Any:
        out = ids * 1000 + positions + score.sum() + (0 if mask is None else mask.sum())
        return out.float()


class Cache:
    def __init__(self) -> None:
        self.version = 1

    def window(self, positions: Any, write: Any, rows: Any) -> None:
        return None


def window(first: int, width: int = 4, rows: int = 2) -> WindowPass:
    ids = torch.arange(first, first + rows * width).reshape(rows, width)
    positions = torch.arange(width).expand(rows, -1).clone()
    write = torch.ones(rows, width, dtype=torch.bool)
    return WindowPass(ids, positions, write, None, None, torch.tensor([[0, 1]] * rows))


def test_a_shape_is_captured_on_its_after_th_run_with_one_cache() -> None:
    cache = Cache()
    g = WindowGraphs(Model(), same_pass, after=3)  # type: ignore[arg-type]
    model = Model()
    for k in range(2):  # short requests never pay for a capture
        w = window(10 * k)
        assert torch.equal(g(cache, w), w.run(model, cache))  # type: ignore[arg-type]
    assert (g.captures, g.replays) == (0, 0)
    other = window(0, width=5)  # another shape counts on its own
    g(cache, other)  # type: ignore[arg-type]
    assert g.captures == 0
    third = window(50)
    assert torch.equal(g(cache, third), third.run(model, cache))  # type: ignore[arg-type]
    assert (g.captures, g.replays) == (1, 1) and g.shapes == {third.shape}
    fourth = window(70)  # replayed on the static inputs, holding this step's values
    assert torch.equal(g(cache, fourth), fourth.run(model, cache))  # type: ignore[arg-type]
    assert (g.captures, g.replays) == (1, 2)
    cache.version = 2  # the cache's tensors were replaced: its graphs go, and so do the counts
    for k in range(2):
        g(cache, window(90 + k))  # type: ignore[arg-type]
    assert (g.captures, g.replays) == (1, 2)
    g(cache, window(99))  # type: ignore[arg-type]
    assert (g.captures, g.replays) == (2, 3)


def test_a_window_s_shape_clone_and_copy() -> None:
    w = window(0)
    assert w.shape == ((2, 4), (2, 4), (2, 4), None, None, (2, 2))
    masked = replace(w, mask=torch.ones(2, 1, 1, 9, dtype=torch.bool), rows=torch.tensor([1, 0]))
    assert masked.shape == ((2, 4), (2, 4), (2, 4), (2,), (2, 1, 1, 9), (2, 2))
    static = masked.clone()
    assert static.ids.data_ptr() != masked.ids.data_ptr()
    static.ids.add_(1)
    assert torch.equal(masked.ids, window(0).ids)  # a clone shares no storage
    new = replace(window(40), mask=torch.zeros(2, 1, 1, 9, dtype=torch.bool))
    new = replace(new, rows=torch.tensor([0, 1]))
    ptrs = [t.data_ptr() for t in static._tensors() if t is not None]
    static.copy_from(new)
    for mine, theirs in zip(static._tensors(), new._tensors(), strict=True):
        assert mine is not None and theirs is not None and torch.equal(mine, theirs)
    assert [t.data_ptr() for t in static._tensors() if t is not None] == ptrs  # in place


# -- the real capture, on a GPU --------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cuda_graph_replay_decodes_what_eager_passes_do(dream_dir: Path, dtype: str) -> None:
    """`cuda_capture` for real: dual-cache window passes replayed as CUDA graphs give the tokens
    (and passes) of the eager ones, for spans alone and in a batch whose rows leave."""
    e = load(str(dream_dir), device="cuda", dtype=dtype)
    graphs = e.runner.graphs
    assert graphs is not None  # a CUDA engine captures by default
    p = InfillParams(span=40, block_size=8, threshold=2.0, cache="dual")  # a pass per token
    reqs = [
        e.request(PREFIX, SUFFIX, replace(p, span=span), cancel=None) for span in (16, 24, 40)
    ] + [e.request("x = [1, 2", "]\nprint(x)\n", replace(p, span=24, block_size=4))]

    def decode() -> list[tuple[list[int], int, int]]:
        out = [e.run([r])[0] for r in reqs] + e.run(reqs)  # alone, then together
        return [(r.token_ids, r.nfe_full, r.nfe_block) for r in out]

    graphed = decode()
    assert graphs.enabled, "a capture failed: the passes above were eager"
    assert graphs.captures >= 4 and graphs.replays > 40
    e.runner.graphs = None
    assert decode() == graphed
