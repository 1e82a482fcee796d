"""CoDA family (model_type "CoDA"): Salesforce CoDA-v0 1.7B Base/Instruct.

A Qwen3 layout adapted to diffusion: Qwen2 names (`model.layers.N.self_attn.{q,k,v,o}_proj`,
`mlp.{gate,up,down}_proj`, `{input,post_attention}_layernorm`, `model.norm`, `lm_head`) with no
q/k/v bias, an explicit `head_dim` (128 with 16 heads over a 2048 hidden size), and
`self_attn.{q,k}_norm`: an RMSNorm over each head's query and key before RoPE. Attention is
bidirectional; the logits are shifted like Dream's (the reference generator reads position i
from hidden state i-1, position 0 from its own). Mask `<|mask|>` 151669, pad 151643; the
released config.json leaves out eos (its config class says 151645, `<|im_end|>`) and
`tie_word_embeddings` (its config class says true, yet its model class never ties, so a stored
`lm_head.weight` is the head and a checkpoint without one reads the embedding).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import ModelArgs
from .dream import QWEN2_RENAMES
from .family import Family, require

QWEN3_RENAMES = (
    *QWEN2_RENAMES,
    (r"model\.(layers\.\d+\.self_attn\.[qk]_norm\.weight)", r"\1"),
)


def parse_coda_args(config: Mapping[str, Any]) -> ModelArgs:
    hidden = int(require(config, "hidden_size", "CoDA"))
    heads = int(require(config, "num_attention_heads", "CoDA"))
    if config.get("rope_scaling"):
        raise ValueError(f"rope_scaling {config['rope_scaling']!r} is not supported")
    if config.get("attention_bias"):
        raise ValueError("CoDA checkpoints with attention_bias=true are not supported")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {config['hidden_act']!r} is not supported")
    return ModelArgs(
        vocab_size=int(require(config, "vocab_size", "CoDA")),
        hidden_size=hidden,
        intermediate_size=int(require(config, "intermediate_size", "CoDA")),
        num_layers=int(require(config, "num_hidden_layers", "CoDA")),
        num_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        rope_theta=float(config.get("rope_theta", 1000000.0)),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
        qkv_bias=False,
        tie_embeddings=bool(config.get("tie_word_embeddings", True)),
        max_positions=int(config.get("max_position_embeddings", 40960)),
        logits_shift=1,
        qk_norm=True,
    )


CODA = Family(
    name="coda",
    model_types=("CoDA",),
    parse_args=parse_coda_args,
    renames=QWEN3_RENAMES,
    default_mask_id=151669,
    extra_end_ids=(151645,),  # <|im_end|>: the config class's eos, absent from config.json
    stored_head_wins=True,
)
