"""LLaDA2 family (model_type "llada2_moe"): LLaDA2.0-mini (inclusionAI), BailingMoE-V2 layout.

Checkpoint names: `model.word_embeddings`, then per block `attention.query_key_value` (one fused
projection, rows q of all heads, then k, then v; split here at load time),
`attention.query_layernorm` / `attention.key_layernorm` (per-head RMSNorm before RoPE, under
`use_qk_norm`), `attention.dense` (the output projection), `{input,post_attention}_layernorm`,
and an `mlp` that is a dense SwiGLU in the first `first_k_dense_replace` blocks
(`intermediate_size` wide) and a mixture in the rest: router `mlp.gate.weight` with its
`mlp.gate.expert_bias`, experts `mlp.experts.E.{gate,up,down}_proj` (`moe_intermediate_size`
wide) and `mlp.shared_experts.{gate,up,down}_proj` (`num_shared_experts` times as wide).

The computation, from the published modeling code and dInfer's: RoPE (rotate-half) on the first
`partial_rotary_factor` of each head's dims, theta `rope_theta`; a sigmoid router in fp32 whose
per-expert bias is added for choosing only, grouped top-k (`n_group` groups scored by the sum of
their two best biased scores, `topk_group` kept), the chosen unbiased scores renormalised to sum
to 1 whenever more than one expert is kept (the code ignores `norm_topk_prob`), times
`routed_scaling_factor`, plus the shared expert. Logits are not shifted (its loss reads each
position's own logits). Mask `<|mask|>` 156895 (not in config.json), eos/pad `<|endoftext|>`
156892. Its own generator attends block-causally (each 32-token block sees itself and earlier
blocks, never later ones); the engine runs it bidirectionally, as every family.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import ModelArgs
from .family import Family, require

_MLP = r"(?:gate|up|down)_proj\.weight"
LLADA2_RENAMES = (
    (r"model\.word_embeddings\.weight", "embed_tokens.weight"),
    (r"model\.norm\.weight", "norm.weight"),
    (r"lm_head\.weight", "lm_head.weight"),
    (r"model\.(layers\.\d+)\.attention\.query_key_value\.weight", r"\1.self_attn.qkv_proj.weight"),
    (r"model\.(layers\.\d+)\.attention\.dense\.weight", r"\1.self_attn.o_proj.weight"),
    (r"model\.(layers\.\d+)\.attention\.query_layernorm\.weight", r"\1.self_attn.q_norm.weight"),
    (r"model\.(layers\.\d+)\.attention\.key_layernorm\.weight", r"\1.self_attn.k_norm.weight"),
    (r"model\.(layers\.\d+\.(?:input|post_attention)_layernorm\.weight)", r"\1"),
    (r"model\.(layers\.\d+\.mlp\.gate\.weight)", r"\1"),
    (r"model\.(layers\.\d+\.mlp)\.gate\.expert_bias", r"\1.expert_bias"),
    (rf"model\.(layers\.\d+\.mlp\.(?:experts\.\d+|shared_experts)\.{_MLP})", r"\1"),
    (rf"model\.(layers\.\d+\.mlp\.{_MLP})", r"\1"),  # the dense first blocks
)
LLADA2_FUSED = (
    (
        r"(layers\.\d+\.self_attn)\.qkv_proj\.weight",
        (r"\1.q_proj.weight", r"\1.k_proj.weight", r"\1.v_proj.weight"),
    ),
)


def _check_supported(config: Mapping[str, Any]) -> None:
    """Options of the LLaDA2 config class that the release leaves off; refused, not ignored."""
    for key in ("use_qkv_bias", "use_bias", "norm_head"):
        if config.get(key):
            raise ValueError(f"LLaDA2 configs with {key}=true are not supported")
    if config.get("rope_scaling"):
        raise ValueError(f"rope_scaling {config['rope_scaling']!r} is not supported")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {config['hidden_act']!r} is not supported")
    if config.get("score_function", "sigmoid") != "sigmoid":
        raise ValueError(f"score_function {config['score_function']!r} is not supported")
    if config.get("num_nextn_predict_layers"):
        raise ValueError("LLaDA2 configs with multi-token-prediction layers are not supported")


def parse_llada2_args(config: Mapping[str, Any]) -> ModelArgs:
    _check_supported(config)
    fam = "LLaDA2"
    hidden = int(require(config, "hidden_size", fam))
    heads = int(require(config, "num_attention_heads", fam))
    head_dim = int(config.get("head_dim") or hidden // heads)
    layers = int(require(config, "num_hidden_layers", fam))
    experts = int(config.get("num_experts", 16) or 0)  # null: every block dense
    top_k = int(config.get("num_experts_per_tok", 2)) if experts else 0
    dense_width = int(require(config, "intermediate_size", fam))
    expert_width = int(require(config, "moe_intermediate_size", fam)) if experts else dense_width
    shared = int(config.get("num_shared_experts") or 0) if experts else 0
    first_dense = min(int(config.get("first_k_dense_replace") or 0), layers) if experts else 0
    # the config class defaults, as the modeling code reads them when config.json omits a field
    factor = float(config.get("partial_rotary_factor", 0.5))
    return ModelArgs(
        vocab_size=int(require(config, "vocab_size", fam)),
        hidden_size=hidden,
        intermediate_size=expert_width,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=head_dim,
        rope_theta=float(config.get("rope_theta", 10000.0)),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-5)),
        qkv_bias=False,
        tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        max_positions=int(config.get("max_position_embeddings", 16384)),
        logits_shift=0,
        qk_norm=bool(config.get("use_qk_norm", False)),
        num_experts=experts,
        experts_per_token=top_k,
        norm_topk_prob=top_k > 1,
        rotary_dim=int(head_dim * factor),
        router="sigmoid",
        expert_groups=int(config.get("n_group", 8)) if experts else 1,
        groups_per_token=int(config.get("topk_group", 4)) if experts else 1,
        routed_scaling=float(config.get("routed_scaling_factor", 2.5)),
        shared_expert_size=expert_width * shared,
        dense_layers=first_dense,
        dense_intermediate_size=dense_width,
    )


LLADA2 = Family(
    name="llada2",
    model_types=("llada2_moe",),
    parse_args=parse_llada2_args,
    renames=LLADA2_RENAMES,
    default_mask_id=156895,
    fused=LLADA2_FUSED,
)
