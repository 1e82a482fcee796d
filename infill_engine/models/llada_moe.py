"""LLaDA-MoE family: LLaDA-MoE-7B-A1B Base/Instruct (inclusionAI).

Its released config.json says model_type "llada", like the dense LLaDA's, but in Qwen-style
fields (`hidden_size`, `num_experts`, ...) rather than OLMo's (`d_model`, `n_heads`); a config
with `num_experts` is read as this family (and so is "lladamoe", the name some trainers rewrite it
to). An OLMoE-like layout under Qwen2 names: `model.layers.N.self_attn.{q,k,v,o}_proj` (no bias),
per-head `self_attn.{q,k}_norm` before RoPE when `qk_layernorm`, and in every block a router
`mlp.gate` over `num_experts` SwiGLU experts `mlp.experts.E.{gate,up,down}_proj`, each
`expert_intermediate_size` wide. The router takes a softmax over all experts and keeps the top
`num_experts_per_tok` probabilities as they are: the published modeling code hard-codes
norm_topk_prob=False whatever the config says, and so does dInfer's fused kernel
(renormalize=False). Logits are not shifted. Mask `<|mask|>` 156895 (not in config.json);
eos/pad `<|endoftext|>` 156892. The 7B-A1B release: 16 layers, 2048 wide, 16 heads of 128,
64 experts of 1024, top 8, no shared expert, RoPE theta 50000.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .coda import QWEN3_RENAMES
from .common import ModelArgs
from .family import Family, require

LLADA_MOE_RENAMES = (
    *QWEN3_RENAMES,
    (r"model\.(layers\.\d+\.mlp\.gate\.weight)", r"\1"),
    (r"model\.(layers\.\d+\.mlp\.experts\.\d+\.(?:gate|up|down)_proj\.weight)", r"\1"),
)


def is_moe_config(config: Mapping[str, Any]) -> bool:
    return "num_experts" in config


def _check_supported(config: Mapping[str, Any]) -> None:
    """Options of the LLaDA-MoE config class that the release leaves off; refused, not ignored."""
    freq = config.get("moe_layer_freq") or []
    if any(int(f) == 0 for f in freq):
        raise ValueError("LLaDA-MoE configs with dense layers (moe_layer_freq 0) are not supported")
    if config.get("shared_expert_intermediate_size"):
        raise ValueError("LLaDA-MoE configs with a shared expert are not supported")
    if config.get("moe_router_enable_expert_bias"):
        raise ValueError("LLaDA-MoE configs with a router expert bias are not supported")
    if config.get("moe_router_score_function") not in (None, "softmax"):
        raise ValueError(
            f"moe_router_score_function {config['moe_router_score_function']!r} is not supported"
        )
    if config.get("partial_rotary_factor") not in (None, 1, 1.0):
        raise ValueError(
            f"partial_rotary_factor {config['partial_rotary_factor']!r} is not supported"
        )
    if config.get("rope_scaling"):
        raise ValueError(f"rope_scaling {config['rope_scaling']!r} is not supported")
    if config.get("clip_qkv") is not None or config.get("attention_bias"):
        raise ValueError("LLaDA-MoE configs with clip_qkv or attention_bias are not supported")


def parse_llada_moe_args(config: Mapping[str, Any]) -> ModelArgs:
    _check_supported(config)
    fam = "LLaDA-MoE"
    hidden = int(require(config, "hidden_size", fam))
    heads = int(require(config, "num_attention_heads", fam))
    return ModelArgs(
        vocab_size=int(require(config, "vocab_size", fam)),
        hidden_size=hidden,
        intermediate_size=int(require(config, "expert_intermediate_size", fam)),
        num_layers=int(require(config, "num_hidden_layers", fam)),
        num_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=hidden // heads,  # the modeling code derives it; o_proj is hidden x hidden
        rope_theta=float(require(config, "rope_theta", fam)),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-5)),
        qkv_bias=False,
        tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        max_positions=int(config.get("max_position_embeddings", 4096)),
        logits_shift=0,
        qk_norm=bool(config.get("qk_layernorm")),
        num_experts=int(require(config, "num_experts", fam)),
        experts_per_token=int(require(config, "num_experts_per_tok", fam)),
        norm_topk_prob=False,
    )


LLADA_MOE = Family(
    name="llada-moe",
    model_types=("llada", "LLaDA", "lladamoe"),
    parse_args=parse_llada_moe_args,
    renames=LLADA_MOE_RENAMES,
    default_mask_id=156895,
    accepts=is_moe_config,
)
