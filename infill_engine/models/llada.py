"""LLaDA family (model_type "llada"): LLaDA-8B Base/Instruct, LLaDA-1.5.

OLMo-style names under `model.transformer.`: `wte`, `blocks.N.{attn_norm, q_proj, k_proj, v_proj,
attn_out, ff_norm, ff_proj, up_proj, ff_out}`, `ln_f`, and the output layer `ff_out` (or `wte`
when `weight_tying`). MLP is `ff_out(silu(ff_proj x) * up_proj x)`; rotate-half RoPE, theta
500000 in the released config; no q/k/v bias; logits are not shifted. Mask id 126336; EOS 126081,
and <|eot_id|> 126348 ends a turn in the instruct models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import ModelArgs
from .family import Family, require

_BLOCK = r"model\.transformer\.blocks\.(\d+)\."
LLADA_RENAMES = (
    (r"model\.transformer\.wte\.weight", "embed_tokens.weight"),
    (r"model\.transformer\.ln_f\.weight", "norm.weight"),
    (r"model\.transformer\.ff_out\.weight", "lm_head.weight"),
    (_BLOCK + r"(q_proj|k_proj|v_proj)\.(weight|bias)", r"layers.\1.self_attn.\2.\3"),
    (_BLOCK + r"attn_out\.weight", r"layers.\1.self_attn.o_proj.weight"),
    (_BLOCK + r"ff_proj\.weight", r"layers.\1.mlp.gate_proj.weight"),
    (_BLOCK + r"up_proj\.weight", r"layers.\1.mlp.up_proj.weight"),
    (_BLOCK + r"ff_out\.weight", r"layers.\1.mlp.down_proj.weight"),
    (_BLOCK + r"attn_norm\.weight", r"layers.\1.input_layernorm.weight"),
    (_BLOCK + r"ff_norm\.weight", r"layers.\1.post_attention_layernorm.weight"),
)


def parse_llada_args(config: Mapping[str, Any]) -> ModelArgs:
    if config.get("block_type", "llama") != "llama":
        raise ValueError(f"LLaDA block_type {config['block_type']!r} is not supported")
    if config.get("layer_norm_type", "rms") != "rms":
        raise ValueError(f"LLaDA layer_norm_type {config['layer_norm_type']!r} is not supported")
    if config.get("include_bias"):
        raise ValueError("LLaDA checkpoints with include_bias=true are not supported")
    d = int(require(config, "d_model", "llada"))
    heads = int(require(config, "n_heads", "llada"))
    vocab = int(config.get("embedding_size") or require(config, "vocab_size", "llada"))
    return ModelArgs(
        vocab_size=vocab,
        hidden_size=d,
        intermediate_size=int(require(config, "mlp_hidden_size", "llada")),
        num_layers=int(require(config, "n_layers", "llada")),
        num_heads=heads,
        num_kv_heads=int(config.get("n_kv_heads") or heads),
        head_dim=d // heads,
        rope_theta=float(config.get("rope_theta", 500000.0)),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-5)),
        qkv_bias=bool(config.get("include_qkv_bias", False)),
        tie_embeddings=bool(config.get("weight_tying", False)),
        max_positions=int(config.get("max_sequence_length", 4096)),
        logits_shift=0,
    )


LLADA = Family(
    name="llada",
    model_types=("llada", "LLaDA"),
    parse_args=parse_llada_args,
    renames=LLADA_RENAMES,
    default_mask_id=126336,
    extra_end_ids=(126348,),
)
