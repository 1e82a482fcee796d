"""MMaDA's text path: LLaDA's layout under model_type "mmada", with image-code rows after the text
vocabulary in the embedding and the output layer. Logits parity with transformers' Llama run
non-causally, over the text vocabulary; the image rows are never scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import MASK_ID, VOCAB, make_llada, reference_logits

from infill_engine import ModelLoadError, load

IMAGE_CODES = 48  # the tiny stand-in for MMaDA's 8192 codebook entries


def make_mmada(path: Path, shards: int = 2) -> Any:
    """A tiny MMaDA checkpoint: a Llama reference of VOCAB + IMAGE_CODES rows in OLMo names, and
    the config the MMaDA training code writes (LLaDA's, merged with the multimodal keys)."""
    total = VOCAB + IMAGE_CODES
    overrides = {
        "architectures": ["MMadaModelLM"], "model_type": "mmada", "auto_map": None,
        "llm_vocab_size": VOCAB, "new_vocab_size": total, "codebook_size": IMAGE_CODES,
        "num_vq_tokens": 16, "num_new_special_tokens": 0,
    }  # fmt: skip
    return make_llada(path, shards, seed=5, vocab=total, overrides=overrides)


def test_mmada_text_path_matches_llama(tmp_path: Path) -> None:
    ref = make_mmada(tmp_path)
    engine = load(str(tmp_path), device="cpu")
    assert engine.family == "mmada" and engine.args.vocab_size == VOCAB
    assert engine.mask_id == MASK_ID and engine.args.logits_shift == 0
    ids = torch.randint(0, VOCAB, (2, 31), generator=torch.Generator().manual_seed(6))
    ours = engine.logits(ids)
    theirs = reference_logits(ref, ids, shift=False)[..., :VOCAB]
    assert ours.shape == (2, 31, VOCAB)
    assert (ours - theirs).abs().max().item() <= 1e-4


def test_a_bad_text_vocabulary_is_named(tmp_path: Path) -> None:
    make_mmada(tmp_path, shards=1)
    config = json.loads((tmp_path / "config.json").read_text())
    config["llm_vocab_size"] = "many"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="llm_vocab_size must be a positive integer"):
        load(str(tmp_path), device="cpu")
