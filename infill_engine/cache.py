"""K/V caches for block decoding: one `KVCache` holds every canvas position of a batch of rows.

Keys are stored *after* RoPE, so a cached key is final for its absolute position and a step that
recomputes only some positions can attend to the cached rest without re-rotating anything.

How the three modes use it (runner.py decides which positions a step recomputes):
- "none":   no cache; every step is a full pass.
- "prefix": the full pass at a block start `refresh`es every position; in-block steps recompute
            the block and everything after it, and read only the prefix from the cache.
- "dual":   the same refresh; in-block steps recompute only the block, and the K/V of the prefix
            *and* of the suffix stay frozen until the next block starts.

Per layer the tensors are [B, Hkv, L + 1, D]. Slot L is a trash slot: window positions that must
not be written (padding, or the frozen token just left of the block that a shifted family needs
as a query) are scattered there, and key masks never let a query see it.
"""

from __future__ import annotations

import itertools

import torch
from torch import Tensor

_VERSIONS = itertools.count(1)


class _Refresh:
    def __init__(self, cache: KVCache, rows: Tensor | None) -> None:
        self.cache, self.rows = cache, rows

    def update(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        self.cache.store(layer, self.rows, k, v)
        return k, v


class _Window:
    def __init__(self, cache: KVCache, rows: Tensor | None, slots: Tensor) -> None:
        self.cache, self.rows, self.slots = cache, rows, slots

    def update(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        return self.cache.scatter(layer, self.rows, self.slots, k, v)


class KVCache:
    def __init__(self, num_layers: int, batch: int, length: int) -> None:
        self.num_layers, self.batch, self.length = num_layers, batch, length
        self.k: list[Tensor] = []
        self.v: list[Tensor] = []
        # renewed whenever the K/V tensors are replaced, unique across caches: a captured CUDA
        # graph (graphs.py) writes into the tensors it was captured with, valid while they stay
        self.version = next(_VERSIONS)

    # -- writers handed to the model ------------------------------------------------------------
    def refresh(self, rows: Tensor | None = None) -> _Refresh:
        """A full pass over `rows` (None = all) will overwrite their K/V at every position."""
        return _Refresh(self, rows)

    def window(self, positions: Tensor, write: Tensor, rows: Tensor | None = None) -> _Window:
        """A pass over window tokens at `positions` [b, W]; only those with `write` are stored."""
        slots = torch.where(write, positions, torch.full_like(positions, self.length))
        return _Window(self, rows, slots)

    # -- storage -------------------------------------------------------------------------------
    def store(self, layer: int, rows: Tensor | None, k: Tensor, v: Tensor) -> None:
        if not self.k:
            self._allocate(k)
        t = k.shape[2]
        if rows is None:
            self.k[layer][:, :, :t] = k
            self.v[layer][:, :, :t] = v
        else:
            self.k[layer][rows, :, :t] = k
            self.v[layer][rows, :, :t] = v

    def scatter(
        self, layer: int, rows: Tensor | None, slots: Tensor, k: Tensor, v: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Write fresh k/v [b, H, W, D] at `slots` [b, W]; return the rows' K/V [b, H, L+1, D]."""
        if not self.k:
            raise RuntimeError("KVCache.window used before any refresh")
        index = slots[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[3])
        if rows is None:
            self.k[layer].scatter_(2, index, k)
            self.v[layer].scatter_(2, index, v)
            return self.k[layer], self.v[layer]
        kk = self.k[layer][rows].scatter_(2, index, k)
        vv = self.v[layer][rows].scatter_(2, index, v)
        self.k[layer][rows] = kk
        self.v[layer][rows] = vv
        return kk, vv

    def _allocate(self, like: Tensor) -> None:
        self.version = next(_VERSIONS)
        shape = (self.batch, like.shape[1], self.length + 1, like.shape[3])
        for _ in range(self.num_layers):
            self.k.append(torch.zeros(shape, dtype=like.dtype, device=like.device))
            self.v.append(torch.zeros(shape, dtype=like.dtype, device=like.device))

    # -- lifetime ------------------------------------------------------------------------------
    def grow(self, rows: int, length: int) -> None:
        """Room for `rows` more rows (appended as the last slots) and positions up to `length`.
        Existing rows keep their K/V; the new slots are zeros until their first full pass."""
        length = max(length, self.length)
        if self.k and (rows or length != self.length):
            self.version = next(_VERSIONS)
            self.k = [self._grown(t, rows, length) for t in self.k]
            self.v = [self._grown(t, rows, length) for t in self.v]
        self.batch += rows
        self.length = length

    def _grown(self, t: Tensor, rows: int, length: int) -> Tensor:
        b, h, _, d = t.shape
        out = t.new_zeros((b + rows, h, length + 1, d))
        # Positions carry over; the old trash slot becomes an ordinary position, which no row
        # reads before a full pass writes it (key masks hide positions past a row's canvas).
        out[:b, :, : self.length] = t[:, :, : self.length]
        return out

    def keep(self, rows: Tensor) -> None:
        """Drop every row not in `rows` (finished or cancelled requests free their K/V now)."""
        self.batch = int(rows.numel())
        if self.k:
            self.version = next(_VERSIONS)
            self.k = [t[rows] for t in self.k]
            self.v = [t[rows] for t in self.v]

    def release(self) -> None:
        self.k, self.v, self.batch, self.length = [], [], 0, 0
        self.version = next(_VERSIONS)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))
