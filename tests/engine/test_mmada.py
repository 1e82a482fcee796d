"""MMaDA's text path: LLaDA's layout under model_type "mmada", with image-code rows after the text
vocabulary in the embedding and the output layer. Logits parity with transformers' Llama run
non-causally, over the text vocabulary; the image rows are never scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import (
    EOS_ID,
    MASK_ID,
    VOCAB,
    llada_name,
    reference_logits,
    save_shards,
    write_tokenizer,
)

from infill_engine import ModelLoadError, load

IMAGE_CODES = 48  # the tiny stand-in for MMaDA's 8192 codebook entries


def make_mmada(path: Path, shards: int = 2) -> Any:
    """A tiny MMaDA checkpoint: a Llama reference of VOCAB + IMAGE_CODES rows in OLMo names, and
    the config the MMaDA training code writes (LLaDA's, merged with the multimodal keys)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(5)
    total = VOCAB + IMAGE_CODES
    cfg = LlamaConfig(
        vocab_size=total, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, rope_theta=500000.0, rms_norm_eps=1e-5,
        max_position_embeddings=512, tie_word_embeddings=False, attention_bias=False,
        mlp_bias=False, attn_implementation="eager",
    )  # fmt: skip
    ref = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    path.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["MMadaModelLM"], "model_type": "mmada",
        "d_model": 64, "n_heads": 4, "n_kv_heads": 4, "n_layers": 2, "mlp_hidden_size": 160,
        "vocab_size": total, "embedding_size": total, "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5, "max_sequence_length": 512, "block_type": "llama",
        "layer_norm_type": "rms", "include_bias": False, "weight_tying": False,
        "mask_token_id": MASK_ID, "eos_token_id": EOS_ID, "pad_token_id": EOS_ID,
        "llm_vocab_size": VOCAB, "new_vocab_size": total, "codebook_size": IMAGE_CODES,
        "num_vq_tokens": 16, "num_new_special_tokens": 0,
    }  # fmt: skip
    (path / "config.json").write_text(json.dumps(config))
    save_shards(path, {llada_name(k): v for k, v in ref.state_dict().items()}, shards)
    write_tokenizer(path)
    return ref


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
