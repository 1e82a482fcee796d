"""Logits parity with transformers' own Qwen2 and Llama, run non-causally, for both layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import VOCAB, make_dream, make_llada, reference_logits

from infill_engine import load


@pytest.mark.parametrize("shards", [1, 3])
def test_dream_matches_qwen2(tmp_path: Path, shards: int) -> None:
    ref = make_dream(tmp_path, shards=shards)
    engine = load(str(tmp_path), device="cpu")
    assert engine.family == "dream"
    ids = torch.randint(0, VOCAB, (2, 37), generator=torch.Generator().manual_seed(1))
    ours = engine.logits(ids)
    theirs = reference_logits(ref, ids, shift=True)
    assert ours.shape == (2, 37, VOCAB)
    assert (ours - theirs).abs().max().item() <= 1e-4


@pytest.mark.parametrize("shards", [1, 2])
def test_llada_matches_llama(tmp_path: Path, shards: int) -> None:
    ref = make_llada(tmp_path, shards=shards)
    engine = load(str(tmp_path), device="cpu")
    assert engine.family == "llada"
    ids = torch.randint(0, VOCAB, (2, 29), generator=torch.Generator().manual_seed(2))
    ours = engine.logits(ids)
    theirs = reference_logits(ref, ids, shift=False)
    assert (ours - theirs).abs().max().item() <= 1e-4


def test_dream_shift_reads_previous_state(dream_engine: object) -> None:
    """Changing the last token changes no earlier position except through attention; the shift
    itself means position 0 and 1 are both scored from hidden state 0."""
    ids = torch.randint(2, VOCAB, (1, 12), generator=torch.Generator().manual_seed(3))
    out = dream_engine.logits(ids)  # type: ignore[attr-defined]
    assert torch.equal(out[0, 0], out[0, 1])
