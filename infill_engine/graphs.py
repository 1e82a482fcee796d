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
        self._graphs: dict[tuple[Any, ...], _Graphed] = {}

    @classmethod
    def for_device(cls, model: DiffusionTransformer) -> WindowGraphs | None:
        device = next(model.parameters()).device
        if device.type != "cuda":
            return None
        return cls(model, cuda_capture(torch.cuda.graph_pool_handle()))

    def __call__(
        self,
        cache: KVCache,
        ids: Tensor,
        positions: Tensor,
        write: Tensor,
        rows: Tensor | None,
        mask: Tensor | None,
        score: Tensor,
    ) -> Tensor:
        """The window pass's logits: replayed when this shape has a graph, else eager."""
        version = cache.version
        if version != self._version:
            self._graphs.clear()  # they write into tensors the cache no longer holds
            self._seen.clear()
            self._version = version
        key = (
            tuple(ids.shape),
            tuple(score.shape),
            None if rows is None else tuple(rows.shape),
            None if mask is None else tuple(mask.shape),
        )
        graphed = self._graphs.get(key)
        if graphed is None and self.enabled:
            seen = self._seen[key] = self._seen.get(key, 0) + 1
            if seen >= self.after:
                try:
                    graphed = _Graphed(self, cache, ids, positions, write, rows, mask, score)
                except RuntimeError as e:
                    self.enabled = False
                    log.warning("CUDA graph capture failed; window passes stay eager: %s", e)
                else:
                    self._graphs[key] = graphed
                    self.captures += 1
        if graphed is None:
            store = cache.window(positions, write, rows)
            return self.model(ids, positions, mask=mask, store=store, score=score)
        self.replays += 1
        return graphed(ids, positions, write, rows, mask, score)

    def clear(self) -> None:
        self._graphs.clear()
        self._seen.clear()
        self._version = None


class _Graphed:
    """One captured window pass and the static tensors it reads."""

    def __init__(
        self,
        owner: WindowGraphs,
        cache: KVCache,
        ids: Tensor,
        positions: Tensor,
        write: Tensor,
        rows: Tensor | None,
        mask: Tensor | None,
        score: Tensor,
    ) -> None:
        self.inputs = [t.clone() for t in (ids, positions, write, score)]
        self.rows = None if rows is None else rows.clone()
        self.mask = None if mask is None else mask.clone()
        s_ids, s_pos, s_write, s_score = self.inputs
        model = owner.model

        def eager() -> Tensor:
            store = cache.window(s_pos, s_write, self.rows)
            return model(s_ids, s_pos, mask=self.mask, store=store, score=s_score)

        self.replay = owner.capture(eager)

    def __call__(
        self,
        ids: Tensor,
        positions: Tensor,
        write: Tensor,
        rows: Tensor | None,
        mask: Tensor | None,
        score: Tensor,
    ) -> Tensor:
        for static, new in zip(self.inputs, (ids, positions, write, score), strict=True):
            static.copy_(new)
        if self.rows is not None and rows is not None:
            self.rows.copy_(rows)
        if self.mask is not None and mask is not None:
            self.mask.copy_(mask)
        return self.replay()
