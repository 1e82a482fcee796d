"""LLaDA2 (model_type "llada2_moe"): logits parity with transformers' GLM-4.5 MoE run non-causally.

Glm4Moe computes LLaDA2's functions: a per-head q/k RMSNorm before RoPE, rotate-half RoPE on the
first `partial_rotary_factor` of each head, dense first blocks (`first_k_dense_replace`), and a
sigmoid router whose correction bias is added for choosing only, grouped top-k (groups scored by
their two best biased scores), renormalised weights times `routed_scaling_factor`, plus a shared
expert. Its weights are written out in the names the released LLaDA2.0-mini checkpoint uses (one
fused `attention.query_key_value`, `attention.dense`, `query_layernorm`/`key_layernorm`,
`mlp.gate.expert_bias`, one tensor per expert, `model.word_embeddings`) under a config.json in
LLaDA2's own fields.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

import pytest
import torch
from cache_checks import check_cached_passes
from conftest import EOS_ID, MASK_ID, VOCAB, reference_logits, save_shards, write_tokenizer

from infill_engine import load
from infill_engine.loader import ModelLoadError
from infill_engine.models import DiffusionTransformer

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 64, 4, 2, 32  # rotary on the first 16 dims of each head
EXPERTS, TOP_K, GROUPS, TOPK_GROUP, EXPERT_WIDTH, DENSE_WIDTH = 16, 4, 4, 2, 16, 96


def glm4_moe(seed: int = 0) -> Any:
    from transformers import Glm4MoeConfig, Glm4MoeForCausalLM

    torch.manual_seed(seed)
    cfg = Glm4MoeConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=DENSE_WIDTH,
        moe_intermediate_size=EXPERT_WIDTH,
        num_hidden_layers=3,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        n_routed_experts=EXPERTS,
        n_shared_experts=1,
        num_experts_per_tok=TOP_K,
        n_group=GROUPS,
        topk_group=TOPK_GROUP,
        routed_scaling_factor=2.5,
        first_k_dense_replace=1,
        norm_topk_prob=True,
        use_qk_norm=True,
        rope_parameters={"rope_type": "default", "rope_theta": 600000.0},
        partial_rotary_factor=0.5,
        rms_norm_eps=1e-6,
        max_position_embeddings=512,
        attention_bias=False,
        tie_word_embeddings=False,
        num_mtp_layers=0,
        attn_implementation="eager",
    )
    ref = Glm4MoeForCausalLM(cfg).eval()
    with torch.no_grad():  # a router that spreads tokens; a bias that changes choices; norms
        for name, p in ref.named_parameters():
            if name.endswith("mlp.gate.weight"):
                p.normal_(std=1.0)
            elif "experts" in name:
                p.normal_(std=0.1)
            elif "norm" in name:
                p.add_(torch.randn_like(p) * 0.2)
        for name, b in ref.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.normal_(std=0.3)
    return ref


def llada2_state(ref: Any) -> dict[str, torch.Tensor]:
    """The reference's weights in LLaDA2.0-mini checkpoint names."""
    sd = ref.state_dict()
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        stem, _, leaf = key.rpartition("self_attn.")
        if leaf in ("k_proj.weight", "v_proj.weight") or "rotary_emb" in key:
            continue  # k and v go into the fused tensor with q
        if leaf == "q_proj.weight":  # rows: all q heads, then k heads, then v heads
            qkv = [sd[f"{stem}self_attn.{p}_proj.weight"] for p in "qkv"]
            out[f"{stem}attention.query_key_value.weight"] = torch.cat(qkv)
        elif leaf == "o_proj.weight":
            out[f"{stem}attention.dense.weight"] = value
        elif leaf in ("q_norm.weight", "k_norm.weight"):
            out[f"{stem}attention.{'query' if leaf[0] == 'q' else 'key'}_layernorm.weight"] = value
        elif key.endswith("mlp.gate.e_score_correction_bias"):
            out[key.replace("e_score_correction_bias", "expert_bias")] = value
        elif key.endswith("mlp.experts.gate_up_proj"):  # [E, 2I, H]: gate rows, then up rows
            base = key.removesuffix("gate_up_proj")
            for e in range(EXPERTS):
                out[f"{base}{e}.gate_proj.weight"] = value[e, :EXPERT_WIDTH]
                out[f"{base}{e}.up_proj.weight"] = value[e, EXPERT_WIDTH:]
        elif key.endswith("mlp.experts.down_proj"):  # [E, H, I]
            base = key.removesuffix("down_proj")
            for e in range(EXPERTS):
                out[f"{base}{e}.down_proj.weight"] = value[e]
        elif key == "model.embed_tokens.weight":
            out["model.word_embeddings.weight"] = value
        else:
            out[key] = value
    return out


def make_llada2(path: Path, shards: int = 1, ref: Any = None, **overrides: Any) -> Any:
    ref = ref if ref is not None else glm4_moe()
    path.mkdir(parents=True, exist_ok=True)
    config = {  # LLaDA2.0-mini's config.json fields, at a tiny size
        "architectures": ["LLaDA2MoeModelLM"],
        "model_type": "llada2_moe",
        "auto_map": {
            "AutoConfig": "configuration_llada2_moe.LLaDA2MoeConfig",
            "AutoModelForCausalLM": "modeling_llada2_moe.LLaDA2MoeModelLM",
        },
        "hidden_size": HIDDEN,
        "intermediate_size": DENSE_WIDTH,
        "moe_intermediate_size": EXPERT_WIDTH,
        "num_hidden_layers": 3,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "num_experts": EXPERTS,
        "num_shared_experts": 1,
        "num_experts_per_tok": TOP_K,
        "n_group": GROUPS,
        "topk_group": TOPK_GROUP,
        "routed_scaling_factor": 2.5,
        "first_k_dense_replace": 1,
        "norm_topk_prob": True,
        "score_function": "sigmoid",
        "moe_router_enable_expert_bias": True,
        "use_qk_norm": True,
        "use_qkv_bias": False,
        "use_bias": False,
        "norm_head": False,
        "partial_rotary_factor": 0.5,
        "rope_theta": 600000,
        "rope_scaling": None,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 512,
        "tie_word_embeddings": False,
        "vocab_size": VOCAB,
        "eos_token_id": EOS_ID,
        "pad_token_id": EOS_ID,
        # the release leaves mask_token_id out (the family's 156895); this vocabulary is tiny
        "mask_token_id": MASK_ID,
        **overrides,
    }
    (path / "config.json").write_text(json.dumps(config))
    save_shards(path, llada2_state(ref), shards)
    write_tokenizer(path)
    return ref


@pytest.mark.parametrize("shards", [1, 3])
def test_llada2_matches_glm4_moe(tmp_path: Path, shards: int) -> None:
    ref = make_llada2(tmp_path, shards)
    engine = load(str(tmp_path), device="cpu")
    assert engine.family == "llada2"
    a = engine.model.args
    assert (a.num_experts, a.experts_per_token) == (EXPERTS, TOP_K)
    assert (a.expert_groups, a.groups_per_token, a.routed_scaling) == (GROUPS, TOPK_GROUP, 2.5)
    assert (a.rope_dim, a.dense_layers, a.shared_expert_size, a.logits_shift) == (16, 1, 16, 0)
    ids = torch.randint(0, VOCAB, (2, 37), generator=torch.Generator().manual_seed(5))
    ours = engine.logits(ids)
    theirs = reference_logits(ref, ids, shift=False)
    assert ours.shape == (2, 37, VOCAB)
    assert (ours - theirs).abs().max().item() <= 1e-4


@pytest.mark.parametrize("cache", ["dual", "prefix"])
def test_the_cached_passes_equal_full_passes(
    tmp_path: Path, cache: Literal["dual", "prefix"]
) -> None:
    """The grouped, routed model decodes through the engine's cached path: every block's first pass
    (which writes the K/V cache) and an in-block pass against that cache give the logits of a
    full pass with no cache (a layer that computes otherwise when handed a store fails here)."""
    make_llada2(tmp_path)
    check_cached_passes(load(str(tmp_path), device="cpu"), cache)


def test_router_bias_groups_and_rotary_each_matter(tmp_path: Path) -> None:
    """Each LLaDA2 function, changed alone, moves the logits off the reference's."""
    ref = make_llada2(tmp_path)
    model = load(str(tmp_path), device="cpu").model
    ids = torch.randint(0, VOCAB, (1, 29), generator=torch.Generator().manual_seed(6))
    want = reference_logits(ref, ids, shift=False)

    def off(net: Any = model) -> float:
        with torch.no_grad():
            return (net(ids, torch.arange(29)[None]) - want).abs().max().item()

    assert off() <= 1e-4
    full = DiffusionTransformer(dataclasses.replace(model.args, rotary_dim=None)).eval()
    full.load_state_dict(model.state_dict())  # RoPE over whole heads: another function
    assert off(full) > 1e-3
    moe = model.layers[1].mlp
    bias = moe.expert_bias.clone()
    moe.expert_bias.zero_()  # the bias picks experts: without it others are chosen
    assert off() > 1e-3
    moe.expert_bias.copy_(bias)
    for layer in model.layers[1:]:  # every group allowed: the group limit was doing work
        layer.mlp.groups_per_token = GROUPS
    assert off() > 1e-3


def test_partial_rotary_rotates_only_the_first_dims() -> None:
    from infill_engine.models.common import apply_rope, rope_cos_sin

    x = torch.randn(1, 2, 5, 8)
    cos, sin = rope_cos_sin(torch.arange(5)[None], 4, 10000.0, x.dtype)
    out = apply_rope(x, cos, sin)
    assert torch.equal(out[..., 4:], x[..., 4:])
    assert torch.allclose(out[..., :4], apply_rope(x[..., :4], cos, sin))
    assert not torch.allclose(out[..., 1:4, :4], x[..., 1:4, :4])  # position 0 is unrotated


def test_mask_id_defaults_to_the_released_one(tmp_path: Path) -> None:
    from infill_engine.models import LLADA2

    assert LLADA2.default_mask_id == 156895
    assert LLADA2.our_name("model.layers.3.mlp.gate.expert_bias") == "layers.3.mlp.expert_bias"
    assert LLADA2.parts("layers.0.self_attn.qkv_proj.weight") == [
        "layers.0.self_attn.q_proj.weight",
        "layers.0.self_attn.k_proj.weight",
        "layers.0.self_attn.v_proj.weight",
    ]


def test_a_fused_qkv_of_the_wrong_size_is_named(tmp_path: Path) -> None:
    ref = glm4_moe()
    make_llada2(tmp_path, ref=ref, num_key_value_heads=HEADS)  # config says 4 kv heads: 2 stored
    with pytest.raises(ModelLoadError, match=r"query_key_value.*expected \(384, 64\)"):
        load(str(tmp_path), device="cpu")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"use_qkv_bias": True}, "use_qkv_bias=true"),
        ({"use_bias": True}, "use_bias=true"),
        ({"norm_head": True}, "norm_head=true"),
        ({"score_function": "softmax"}, "score_function 'softmax'"),
        ({"rope_scaling": {"type": "linear", "factor": 2.0}}, "rope_scaling"),
        ({"n_group": 3}, "16 experts in 3 groups"),
    ],
)
def test_unsupported_llada2_options_are_refused(
    tmp_path: Path, override: dict[str, Any], message: str
) -> None:
    make_llada2(tmp_path, **override)
    with pytest.raises(ModelLoadError, match=message):
        load(str(tmp_path), device="cpu")
