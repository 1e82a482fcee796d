"""LLaDA-MoE: logits parity with transformers' Qwen3-MoE run non-causally.

Qwen3-MoE is the reference that runs here with LLaDA-MoE's exact functions: a per-head q/k
RMSNorm before RoPE (OLMoE's spans all heads at once: a different function) and a softmax
router keeping the top k probabilities. Its fused expert tensors are written out per expert, in
the names the released LLaDA-MoE checkpoint uses, under a config.json in its own fields (model
type "llada", as released).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import pytest
import torch
from cache_checks import check_cached_passes
from conftest import (
    EOS_ID,
    MASK_ID,
    VOCAB,
    make_llada,
    reference_logits,
    save_shards,
    write_tokenizer,
)

from infill_engine import load
from infill_engine.loader import ModelLoadError
from infill_engine.models import DiffusionTransformer, ModelArgs

HIDDEN, HEADS, KV_HEADS, EXPERTS, TOP_K, EXPERT_WIDTH = 64, 4, 2, 8, 2, 32


def qwen3_moe(norm_topk_prob: bool, seed: int = 0) -> Any:
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3MoeConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=EXPERT_WIDTH,
        moe_intermediate_size=EXPERT_WIDTH,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HIDDEN // HEADS,
        num_experts=EXPERTS,
        num_experts_per_tok=TOP_K,
        norm_topk_prob=norm_topk_prob,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        rope_theta=50000.0,
        rms_norm_eps=1e-5,
        max_position_embeddings=512,
        attention_bias=False,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    ref = Qwen3MoeForCausalLM(cfg).eval()
    with torch.no_grad():  # a router that sends tokens to different experts; norms that count
        for name, p in ref.named_parameters():
            if name.endswith("mlp.gate.weight"):
                p.normal_(std=1.0)
            elif "experts" in name:
                p.normal_(std=0.1)
            elif "norm" in name:
                p.add_(torch.randn_like(p) * 0.2)
    return ref


def llada_moe_state(ref: Any) -> dict[str, torch.Tensor]:
    """The reference's weights in LLaDA-MoE checkpoint names: one tensor per expert."""
    out = {}
    for key, value in ref.state_dict().items():
        if key.endswith("mlp.experts.gate_up_proj"):  # [E, 2I, H]: gate rows, then up rows
            stem = key.removesuffix("gate_up_proj")
            for e in range(EXPERTS):
                out[f"{stem}{e}.gate_proj.weight"] = value[e, :EXPERT_WIDTH]
                out[f"{stem}{e}.up_proj.weight"] = value[e, EXPERT_WIDTH:]
        elif key.endswith("mlp.experts.down_proj"):  # [E, H, I]
            stem = key.removesuffix("down_proj")
            for e in range(EXPERTS):
                out[f"{stem}{e}.down_proj.weight"] = value[e]
        else:
            out[key] = value
    return out


def make_llada_moe(path: Path, shards: int = 1, **overrides: Any) -> Any:
    ref = qwen3_moe(norm_topk_prob=False)
    path.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["LLaDAMoEModelLM"],
        "model_type": "llada",
        "auto_map": {
            "AutoConfig": "configuration_lladamoe.LLaDAConfig",
            "AutoModel": "modeling_lladamoe.LLaDAMoEModelLM",
        },
        "hidden_size": HIDDEN,
        "num_hidden_layers": 2,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "dense_intermediate_size": 128,
        "expert_intermediate_size": EXPERT_WIDTH,
        "shared_expert_intermediate_size": None,
        "num_experts": EXPERTS,
        "num_experts_per_tok": TOP_K,
        "norm_topk_prob": False,
        "moe_layer_freq": [1, 1],
        "moe_router_enable_expert_bias": None,
        "moe_router_score_function": None,
        "qk_layernorm": True,
        "hidden_act": "silu",
        "rope_theta": 50000,
        "partial_rotary_factor": 1,
        "rope_scaling": None,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 512,
        "tie_word_embeddings": False,
        "vocab_size": VOCAB,
        "mask_token_id": MASK_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": EOS_ID,
        **overrides,
    }
    (path / "config.json").write_text(json.dumps(config))
    save_shards(path, llada_moe_state(ref), shards)
    write_tokenizer(path)
    return ref


@pytest.mark.parametrize("shards", [1, 3])
def test_llada_moe_matches_qwen3_moe(tmp_path: Path, shards: int) -> None:
    ref = make_llada_moe(tmp_path, shards)
    engine = load(str(tmp_path), device="cpu")
    assert engine.family == "llada-moe"
    args = engine.model.args
    assert (args.num_experts, args.experts_per_token, args.norm_topk_prob) == (8, 2, False)
    ids = torch.randint(0, VOCAB, (2, 31), generator=torch.Generator().manual_seed(5))
    ours = engine.logits(ids)
    theirs = reference_logits(ref, ids, shift=False)
    assert ours.shape == (2, 31, VOCAB)
    assert (ours - theirs).abs().max().item() <= 1e-4


@pytest.mark.parametrize("cache", ["dual", "prefix"])
def test_the_cached_passes_equal_full_passes(
    tmp_path: Path, cache: Literal["dual", "prefix"]
) -> None:
    """The routed model decodes through the engine's cached path: every block's first pass
    (which writes the K/V cache) and an in-block pass against that cache give the logits of a
    full pass with no cache (a layer that computes otherwise when handed a store fails here)."""
    make_llada_moe(tmp_path)
    check_cached_passes(load(str(tmp_path), device="cpu"), cache)


def test_renormalised_top_k_matches_qwen3_moe() -> None:
    """The same MoE block with norm_topk_prob=True (Qwen3-MoE's default), weights copied."""
    ref = qwen3_moe(norm_topk_prob=True, seed=1)
    args = ModelArgs(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=EXPERT_WIDTH, num_layers=2,
        num_heads=HEADS, num_kv_heads=KV_HEADS, head_dim=HIDDEN // HEADS, rope_theta=50000.0,
        rms_norm_eps=1e-5, qkv_bias=False, tie_embeddings=False, max_positions=512,
        logits_shift=0, qk_norm=True, num_experts=EXPERTS, experts_per_token=TOP_K,
        norm_topk_prob=True,
    )  # fmt: skip
    ours = DiffusionTransformer(args).eval()
    state = {k.removeprefix("model."): v for k, v in llada_moe_state(ref).items()}
    ours.load_state_dict(state, strict=True)  # raises on any missing or extra name
    ids = torch.randint(0, VOCAB, (1, 23), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        got = ours(ids, torch.arange(23)[None])
    want = reference_logits(ref, ids, shift=False)
    assert (got - want).abs().max().item() <= 1e-4
    # renormalising matters: the same weights without it give other logits
    plain = DiffusionTransformer(ModelArgs(**{**args.__dict__, "norm_topk_prob": False})).eval()
    plain.load_state_dict(state)
    with torch.no_grad():
        assert (plain(ids, torch.arange(23)[None]) - want).abs().max().item() > 1e-3


def test_dense_llada_config_still_reads_as_llada(tmp_path: Path) -> None:
    make_llada(tmp_path)
    assert load(str(tmp_path), device="cpu").family == "llada"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"moe_layer_freq": [0, 1]}, "dense layers"),
        ({"shared_expert_intermediate_size": 64}, "shared expert"),
        ({"moe_router_score_function": "sigmoid"}, "'sigmoid' is not supported"),
        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor 0.5"),
    ],
)
def test_unsupported_llada_moe_options_are_refused(
    tmp_path: Path, override: dict[str, Any], message: str
) -> None:
    make_llada_moe(tmp_path, **override)
    with pytest.raises(ModelLoadError, match=message):
        load(str(tmp_path), device="cpu")
