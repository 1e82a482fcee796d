"""Dream family (model_type "Dream"): Dream-v0 7B, DiffuCoder-7B, Dream-Coder-7B, builtin.

Qwen2 layout: `model.layers.N.self_attn.{q,k,v,o}_proj` with q/k/v biases, GQA, `lm_head`.
The network was initialised from an autoregressive Qwen2.5, so its logits are shifted: the token at
position i is scored from hidden state i-1 (and position 0 from its own). Mask id 151666, pad and
eos 151643 in the released checkpoints; the config's own values win when present.

Qwen2 checkpoints trained as diffusion models (Open-dCoder) use the same layout and shift; they are
accepted only when the caller asks for a diffusion reading of model_type "qwen2".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import ModelArgs
from .family import Family, require

QWEN2_RENAMES = (
    (r"model\.embed_tokens\.weight", "embed_tokens.weight"),
    (r"model\.norm\.weight", "norm.weight"),
    (r"lm_head\.weight", "lm_head.weight"),
    (r"model\.(layers\.\d+\.(?:self_attn|mlp)\.\w+_proj\.(?:weight|bias))", r"\1"),
    (r"model\.(layers\.\d+\.(?:input|post_attention)_layernorm\.weight)", r"\1"),
)


def parse_qwen2_args(config: Mapping[str, Any]) -> ModelArgs:
    fam = str(config.get("model_type", "Dream"))
    hidden = int(require(config, "hidden_size", fam))
    heads = int(require(config, "num_attention_heads", fam))
    if config.get("rope_scaling"):
        raise ValueError(f"rope_scaling {config['rope_scaling']!r} is not supported")
    return ModelArgs(
        vocab_size=int(require(config, "vocab_size", fam)),
        hidden_size=hidden,
        intermediate_size=int(require(config, "intermediate_size", fam)),
        num_layers=int(require(config, "num_hidden_layers", fam)),
        num_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        rope_theta=float(config.get("rope_theta", 10000.0)),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
        qkv_bias=True,
        tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        max_positions=int(config.get("max_position_embeddings", 32768)),
        logits_shift=1,
    )


DREAM = Family(
    name="dream",
    model_types=("Dream",),
    parse_args=parse_qwen2_args,
    renames=QWEN2_RENAMES,
    default_mask_id=151666,
)

QWEN2_DIFFUSION = Family(
    name="qwen2-diffusion",
    model_types=("qwen2",),
    parse_args=parse_qwen2_args,
    renames=QWEN2_RENAMES,
    default_mask_id=None,  # from the tokenizer
)


def checkpoint_key(our_name: str) -> str:
    """Our parameter name -> the Dream checkpoint name (used when writing the builtin model)."""
    return our_name if our_name == "lm_head.weight" else f"model.{our_name}"
