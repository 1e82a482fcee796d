"""CUDA graphs for the window pass: the same kernels, replayed without launching each from Python.

At batch 1 a 7B model's block pass is launch-bound, not bandwidth-bound: on an H200 it takes
18.7 ms eager and 8.4 ms replayed as a CUDA graph against a 3.5 ms floor (docs/engine.md). A
window pass is a good graph: within a block its shapes repeat step after step (the rows, the
window width, the rows it scores, the cache's length), only the tensors' contents change.

`WindowGraphs` keeps one graph per such shape. A shape is captured only once it has run eagerly
`after` times with the same cache (a short request never pays for a capture it would not use).
Replaying copies the step's inputs into the graph's static tensors; the graph's K/V writes land
in the cache it was captured with, so every graph is dropped when the cache's tensors are
replaced (`KVCache.version`: a row joins or leaves, a request starts). The outputs are the same
kernels' outputs as the eager pass (checked on a GPU by `dllm-infill bench`, which reports the
tokens' agreement with the eager dual-cache run).

Any failure to capture turns graphs off for the runner and the eager pass answers; CPUs never
capture (`for_device`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor

from .cache import KVCache
from .models import DiffusionTransformer

log = logging.getLogger(__name__)

Pass = Callable[[], Tensor]
Capture = Callable[[Pass], Pass]  # an eager pass -> its replay (which returns the same output)


def cuda_capture(pool: Any) -> Capture:
    """Capture on the current CUDA device, all graphs sharing one memory pool."""

    def capture(fn: Pass) -> Pass:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up off the capture (its K/V writes are the same values)
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            out = fn()

        def replay() -> Tensor:
            graph.replay()
            return out

        return replay

    return capture


@dataclass(frozen=True)
class WindowPass:
    """One window pass's inputs (BlockRunner.window_pass builds them)."""

    ids: Tensor  # [b, W] tokens
    positions: Tensor  # [b, W]
    write: Tensor  # [b, W] bool: positions whose K/V the pass stores
    rows: Tensor | None  # the rows' cache slots; None: every row of the cache, in order
    mask: Tensor | None  # key mask
    score: Tensor  # [b, n] indices into W of the hidden states that go through lm_head

    @property
    def shape(self) -> tuple[Any, ...]:
        """What a graph is specific to: every tensor's shape."""
        return tuple(None if t is None else tuple(t.shape) for t in self._tensors())

    def run(self, model: DiffusionTransformer, cache: KVCache) -> Tensor:
        """The eager pass: logits [b, n, V]."""
        store = cache.window(self.positions, self.write, self.rows)
        return model(self.ids, self.positions, mask=self.mask, store=store, score=self.score)

    def clone(self) -> WindowPass:
        rows = None if self.rows is None else self.rows.clone()
        mask = None if self.mask is None else self.mask.clone()
        return WindowPass(
            self.ids.clone(), self.positions.clone(), self.write.clone(), rows, mask,
            self.score.clone(),
        )  # fmt: skip

    def copy_from(self, other: WindowPass) -> None:
        for mine, new in zip(self._tensors(), other._tensors(), strict=True):
            if mine is not None and new is not None:
                mine.copy_(new)

    def _tensors(self) -> tuple[Tensor | None, ...]:
        return (self.ids, self.positions, self.write, self.rows, self.mask, self.score)


class WindowGraphs:
    def __init__(self, model: DiffusionTransformer, capture: Capture, after: int = 3) -> None:
        self.model = model
        self.capture = capture
        self.after = after  # eager runs of a shape (with one cache) before it is captured
        self.enabled = True
        self.captures = 0
        self.replays = 0
        self._version: int | None = None  # the cache version the graphs were captured with
        self._seen: dict[tuple[Any, ...], int] = {}
        self._graphs: dict[tuple[Any, ...], tuple[WindowPass, Pass]] = {}  # static inputs, replay

    @property
    def shapes(self) -> frozenset[tuple[Any, ...]]:
        """The window shapes (`WindowPass.shape`) that have a captured graph now: a copy, to
        read (the graphs go when the cache's tensors are replaced)."""
        return frozenset(self._graphs)

    @classmethod
    def for_device(cls, model: DiffusionTransformer) -> WindowGraphs | None:
        device = next(model.parameters()).device
        if device.type != "cuda":
            return None
        return cls(model, cuda_capture(torch.cuda.graph_pool_handle()))

    def __call__(self, cache: KVCache, window: WindowPass) -> Tensor:
        """The window pass's logits: replayed when this shape has a graph, else eager."""
        if cache.version != self._version:
            self._graphs.clear()  # they write into tensors the cache no longer holds
            self._seen.clear()
            self._version = cache.version
        key = window.shape
        graphed = self._graphs.get(key)
        if graphed is None and self.enabled:
            seen = self._seen[key] = self._seen.get(key, 0) + 1
            if seen >= self.after:
                static = window.clone()
                try:
                    graphed = static, self.capture(partial(static.run, self.model, cache))
                except RuntimeError as e:
                    self.enabled = False
                    log.warning("CUDA graph capture failed; window passes stay eager: %s", e)
                else:
                    self._graphs[key] = graphed
                    self.captures += 1
        if graphed is None:
            return window.run(self.model, cache)
        static, replay = graphed
        static.copy_from(window)
        self.replays += 1
        return replay()
