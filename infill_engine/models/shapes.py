"""The shapes of released checkpoints, as their config.json files give them, for random models.

`dllm-infill bench --random-init --shape dream-7b` builds a network of a real checkpoint's shape
with random weights, so that pass times on a GPU can be measured without downloading anything.
The configs go through the family's own parser, the path a real checkpoint takes, so a shape
here is exactly what loading the released directory would build.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .coda import CODA
from .common import ModelArgs
from .dream import DREAM
from .family import Family
from .llada import LLADA
from .llada2 import LLADA2
from .llada_moe import LLADA_MOE

# The architecture fields of the released config.json files (Dream-org/Dream-v0-Base-7B, whose
# shape DiffuCoder-7B and Dream-Coder-7B share; GSAI-ML/LLaDA-8B-Base; Salesforce/CoDA-v0-Base,
# the config.json its repository ships, which leaves tie_word_embeddings to its config class;
# inclusionAI/LLaDA-MoE-7B-A1B-Base, whose vocabulary is the Ling tokenizer's 157,184;
# inclusionAI/LLaDA2.0-mini, which leaves mask_token_id out: the family's 156895).
SHAPES: dict[str, tuple[Family, dict[str, Any]]] = {
    "dream-7b": (
        DREAM,
        {
            "model_type": "Dream",
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "vocab_size": 152064,
            "rope_theta": 1000000.0,
            "rms_norm_eps": 1e-06,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
            "mask_token_id": 151666,
        },
    ),
    "llada-8b": (
        LLADA,
        {
            "model_type": "llada",
            "d_model": 4096,
            "mlp_hidden_size": 12288,
            "n_layers": 32,
            "n_heads": 32,
            "n_kv_heads": 32,
            "vocab_size": 126464,
            "embedding_size": 126464,
            "rope_theta": 500000.0,
            "rms_norm_eps": 1e-05,
            "max_sequence_length": 4096,
            "weight_tying": False,
            "mask_token_id": 126336,
        },
    ),
    "coda-1.7b": (
        CODA,
        {
            "model_type": "CoDA",
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "num_hidden_layers": 28,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 151936,
            "rope_theta": 1000000,
            "rms_norm_eps": 1e-06,
            "max_position_embeddings": 40960,
            "attention_bias": False,
            "mask_token_id": 151669,
        },
    ),
    "llada-moe-7b": (
        LLADA_MOE,
        {
            "model_type": "llada",
            "hidden_size": 2048,
            "num_hidden_layers": 16,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "dense_intermediate_size": 8192,
            "expert_intermediate_size": 1024,
            "num_experts": 64,
            "num_experts_per_tok": 8,
            "moe_layer_freq": [1] * 16,
            "qk_layernorm": True,
            "vocab_size": 157184,
            "rope_theta": 50000,
            "rms_norm_eps": 1e-05,
            "max_position_embeddings": 8192,
            "tie_word_embeddings": False,
            "mask_token_id": 156895,
        },
    ),
    "llada2-mini": (
        LLADA2,
        {
            "model_type": "llada2_moe",
            "hidden_size": 2048,
            "intermediate_size": 5120,
            "moe_intermediate_size": 512,
            "num_hidden_layers": 20,
            "num_attention_heads": 16,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "num_experts": 256,
            "num_experts_per_tok": 8,
            "num_shared_experts": 1,
            "n_group": 8,
            "topk_group": 4,
            "routed_scaling_factor": 2.5,
            "first_k_dense_replace": 1,
            "score_function": "sigmoid",
            "use_qk_norm": True,
            "use_qkv_bias": False,
            "norm_head": False,
            "partial_rotary_factor": 0.5,
            "vocab_size": 157184,
            "rope_theta": 600000,
            "rms_norm_eps": 1e-06,
            "max_position_embeddings": 32768,
            "tie_word_embeddings": False,
            "mask_token_id": 156895,
        },
    ),
}


def shape_args(name: str, layers: int | None = None) -> tuple[Family, ModelArgs, int]:
    """(family, args, mask id) of a named shape; `layers` keeps only that many blocks (a smoke
    run of the same widths on a machine that cannot hold the whole network)."""
    if name not in SHAPES:
        raise ValueError(f"unknown shape {name!r}; known: {', '.join(sorted(SHAPES))}")
    family, config = SHAPES[name]
    args = family.parse_args(config)
    if layers is not None:
        if not 1 <= layers <= args.num_layers:
            raise ValueError(f"layers must be in 1..{args.num_layers} for {name}, got {layers}")
        args = replace(args, num_layers=layers)
    return family, args, int(config["mask_token_id"])


def parameter_count(args: ModelArgs) -> int:
    """Parameters of `DiffusionTransformer(args)`, counted from the shape alone."""
    d, hd = args.hidden_size, args.head_dim
    q, kv = args.num_heads * hd, args.num_kv_heads * hd
    attn = d * (q + 2 * kv) + q * d + (q + 2 * kv if args.qkv_bias else 0)
    attn += 2 * hd if args.qk_norm else 0
    mlp = 3 * d * args.intermediate_size
    if args.num_experts:  # every expert is a full SwiGLU, plus the router
        mlp = args.num_experts * mlp + d * args.num_experts
        mlp += args.num_experts if args.router == "sigmoid" else 0  # its choice-only bias
        mlp += 3 * d * args.shared_expert_size
    dense = min(args.dense_layers, args.num_layers)  # LLaDA2's first, dense blocks
    mlps = (args.num_layers - dense) * mlp + dense * 3 * d * args.dense_intermediate_size
    per_layer = attn + 2 * d  # and two RMSNorm weights
    embed = args.vocab_size * d
    head = 0 if args.tie_embeddings else args.vocab_size * d
    return embed + args.num_layers * per_layer + mlps + d + head
