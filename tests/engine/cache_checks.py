"""The cache checks every family's engine runs: a block's first pass and its in-block passes each
equal a full pass (`Engine.logits`, which passes no K/V store).

- `block_start_errors` decodes a real fill and, at every refresh pass (the first pass of a block,
  which writes the K/V cache), compares the model's logits with a full pass over the same ids.
- `window_error` refreshes a cache on a canvas, then recomputes only a block (dual) or
  block..end (prefix) against it, as an in-block pass does, on the unchanged canvas; those
  logits must be the full pass's. (Once a block commits tokens the cached context is stale by
  design, so an unchanged canvas is where an in-block pass has an exact reference.)
Both go through the model's public forward with the cache's own writers, so a family that
computes differently whenever a store is passed (a skipped expert, a wrong key) fails here.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from infill_engine import Engine, InfillParams, InfillResult
from infill_engine.cache import KVCache


def _scored(full: torch.Tensor, score: torch.Tensor, shift: int) -> torch.Tensor:
    """The full pass's logits [B, N, V] at the positions that hidden states `score` [B, N] score:
    a family with a logits shift scores position s + shift from hidden state s."""
    index = (score + shift).clamp(max=full.shape[1] - 1)
    return torch.gather(full, 1, index[..., None].expand(-1, -1, full.shape[-1]))


def block_start_errors(
    engine: Engine, prefix: str, suffix: str, params: InfillParams
) -> tuple[list[float], InfillResult]:
    """Decode (prefix, suffix) with `params`; the max |logit difference| of each refresh pass
    against a full pass over the same canvas, and the fill's result."""
    errors: list[float] = []
    shift = engine.model.args.logits_shift
    handle: Any = None

    def hook(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: torch.Tensor) -> None:
        if type(kwargs.get("store")).__name__ != "_Refresh":
            return
        handle.remove()  # engine.logits runs the same model: not a pass to check
        try:
            want = _scored(engine.logits(args[0]), kwargs["score"], shift)
            errors.append((want - out.float()).abs().max().item())
        finally:
            attach()

    def attach() -> None:
        nonlocal handle
        handle = engine.model.register_forward_hook(hook, with_kwargs=True)

    attach()
    try:
        result = engine.infill(prefix, suffix, params)
    finally:
        handle.remove()
    return errors, result


def window_error(
    engine: Engine, cache: str, block_start: int, width: int = 6, length: int = 14, seed: int = 5
) -> float:
    """Refresh a cache over a random canvas whose block [block_start, block_start + width) is
    masked, then run the in-block pass of `cache` ("dual" or "prefix") on the same canvas; the
    max |logit difference| at the block's positions against a full pass."""
    vocab = engine.model.args.vocab_size
    ids = torch.randint(2, vocab, (1, length), generator=torch.Generator().manual_seed(seed))
    ids[0, block_start : block_start + width] = engine.mask_id
    shift = engine.model.args.logits_shift
    kv = KVCache(engine.model.args.num_layers, 1, length)
    positions = torch.arange(length)[None]
    block = torch.arange(block_start, block_start + width)[None]
    with torch.inference_mode():
        engine.model(ids, positions, store=kv.refresh())
        # the window: the block (dual) or block..end (prefix), plus the frozen token left of the
        # block whose hidden state scores the block's first position in a shifted family
        start, end = block_start - shift, block_start + width if cache == "dual" else length
        raw = torch.arange(start, end)[None]
        at, write = raw.clamp(min=0), raw >= block_start  # a clamped duplicate is not stored
        keys = (torch.arange(length + 1) < length)[None, None, None, :]  # never the trash slot
        score = (block - shift).clamp(min=0) - start
        store = kv.window(at, write)
        got = engine.model(ids[:, at[0]], at, mask=keys, store=store, score=score)
        want = engine.logits(ids)[:, block[0]]
    return (want - got.float()).abs().max().item()


def check_cached_passes(engine: Engine, cache: Literal["dual", "prefix"]) -> None:
    """The MoE families' check: a 24-token fill in blocks of 8 takes 3 full passes and some
    in-block ones, each block's first pass equals a full pass with no cache, and so do in-block
    passes at block starts 0 and 5 (all within 1e-4)."""
    p = InfillParams(span=24, max_span=24, block_size=8, cache=cache, min_tokens=24)
    errors, r = block_start_errors(engine, "def add(a, b):\n    return ", "\n", p)
    assert (r.tokens, r.nfe_full, r.stop_reason) == (24, 3, "span_full") and r.nfe_block >= 1
    assert len(errors) == 3 and max(errors) <= 1e-4
    assert window_error(engine, cache, block_start=0) <= 1e-4
    assert window_error(engine, cache, block_start=5) <= 1e-4
