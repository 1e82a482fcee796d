"""CoDA (model_type "CoDA"): logits parity with transformers' Qwen3 run non-causally.

The tiny checkpoint is written the way the released CoDA-v0 directory is: Qwen3 tensor names
with per-head `self_attn.{q,k}_norm`, an explicit head_dim that is not hidden/heads, no q/k/v
bias, and a config.json in CoDA's own fields that, like the release, leaves out
tie_word_embeddings and eos_token_id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import EOS_ID, MASK_ID, VOCAB, reference_logits, save_shards, write_tokenizer

from infill_engine import load

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 64, 4, 2, 32  # head_dim * heads = 128 != hidden


def make_coda(path: Path, stored_head: bool, shards: int = 1, seed: int = 0) -> Any:
    """A tiny CoDA checkpoint; returns the Qwen3 reference holding the same weights.
    stored_head: lm_head.weight is in the checkpoint (untied), else the embedding is the head."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        max_position_embeddings=512,
        attention_bias=False,
        tie_word_embeddings=not stored_head,
        attn_implementation="eager",
    )
    ref = Qwen3ForCausalLM(cfg).eval()
    with torch.no_grad():  # HF inits norms to 1; make the q/k norms' weights count
        for name, p in ref.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.2)
    path.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["CoDALanguageModel"],
        "model_type": "CoDA",
        "auto_map": {
            "AutoConfig": "model_config.CoDAConfig",
            "AutoModel": "modeling_coda.CoDALanguageModel",
        },
        "attention_bias": False,
        "attention_kernel": "flash_attention",
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "intermediate_size": 96,
        "mask_token_id": MASK_ID,
        "max_position_embeddings": 512,
        "num_attention_heads": HEADS,
        "num_hidden_layers": 2,
        "num_key_value_heads": KV_HEADS,
        "pad_token_id": EOS_ID,
        "rms_norm_eps": 1e-6,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "torch_dtype": "float32",
        "vocab_size": VOCAB,
    }
    (path / "config.json").write_text(json.dumps(config))
    state = {k: v for k, v in ref.state_dict().items() if stored_head or k != "lm_head.weight"}
    save_shards(path, state, shards)
    write_tokenizer(path)
    return ref


@pytest.mark.parametrize(("stored_head", "shards"), [(True, 1), (True, 2), (False, 1)])
def test_coda_matches_qwen3(tmp_path: Path, stored_head: bool, shards: int) -> None:
    ref = make_coda(tmp_path, stored_head, shards)
    engine = load(str(tmp_path), device="cpu")
    assert engine.family == "coda"
    assert engine.model.args.qk_norm and engine.model.args.head_dim == HEAD_DIM
    assert engine.model.args.tie_embeddings is not stored_head
    ids = torch.randint(0, VOCAB, (2, 33), generator=torch.Generator().manual_seed(4))
    ours = engine.logits(ids)
    theirs = reference_logits(ref, ids, shift=True)
    assert ours.shape == (2, 33, VOCAB)
    assert (ours - theirs).abs().max().item() <= 1e-4
    # the shift is real: unshifted reference logits differ
    assert (ours - reference_logits(ref, ids, shift=False)).abs().max().item() > 1e-2


def test_coda_q_k_norms_are_loaded(tmp_path: Path) -> None:
    """A checkpoint without its q/k norm tensors is refused, not silently normalised by 1."""
    make_coda(tmp_path, stored_head=True)
    from safetensors.torch import load_file, save_file

    file = tmp_path / "model.safetensors"
    state = {k: v for k, v in load_file(str(file)).items() if "k_norm" not in k}
    save_file(state, str(file))
    with pytest.raises(ValueError, match=r"2 weight\(s\) missing, e\.g\. layers\.0\.self_attn"):
        load(str(tmp_path), device="cpu")
