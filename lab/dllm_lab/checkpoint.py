"""Model directories the trainer writes and reads: HF Dream layout, fp16 safetensors.

`save_model` writes config.json, model.safetensors (atomically) or, with `shard_bytes`, shards
of at most that size with a `model.safetensors.index.json` (the Hugging Face layout, which the
loader reads; files stay under a size limit), the tokenizer files and training_meta.json (every
stage's record and the recipe). `warm_start` reads such a directory
back through the normal loader, so a checkpoint that trains further is exactly the one the engine
would serve. `build_model` makes a fresh model of a recipe's architecture.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

from infill_engine.models.common import DiffusionTransformer
from infill_engine.models.dream import checkpoint_key, parse_qwen2_args

from .recipe import ModelSpec, TrainConfig
from .tokenizer_build import DELETE_TOKEN, END_TOKEN, EXPAND_TOKEN, MASK_TOKEN, save_tokenizer


def special_ids(tok: Tokenizer) -> tuple[int, int]:
    """(end id, mask id) of a tokenizer built by tokenizer_build."""
    end_id, mask_id = tok.token_to_id(END_TOKEN), tok.token_to_id(MASK_TOKEN)
    if end_id is None or mask_id is None:
        raise ValueError(f"tokenizer lacks {END_TOKEN} or {MASK_TOKEN}")
    return int(end_id), int(mask_id)


def dreamon_ids(tok: Tokenizer) -> dict[str, int]:
    """expand_token_id / delete_token_id where the tokenizer reserves them (older ones do not)."""
    out = {}
    for key, token in (("expand_token_id", EXPAND_TOKEN), ("delete_token_id", DELETE_TOKEN)):
        i = tok.token_to_id(token)
        if i is not None:
            out[key] = int(i)
    return out


def hf_config(model: ModelSpec, tok: Tokenizer) -> dict[str, Any]:
    """config.json of the Dream layout for this architecture and tokenizer."""
    end_id, mask_id = special_ids(tok)
    return {
        "model_type": "Dream",
        "architectures": ["DreamModel"],
        "vocab_size": tok.get_vocab_size(),
        **dataclasses.asdict(model),
        "hidden_act": "silu",
        "mask_token_id": mask_id,
        **dreamon_ids(tok),
        "pad_token_id": end_id,
        "eos_token_id": end_id,
        "bos_token_id": end_id,
        "torch_dtype": "float16",
    }


def build_model(model: ModelSpec, tok: Tokenizer) -> DiffusionTransformer:
    """A freshly initialised model of this architecture (GPT-2 style scaled normal init)."""
    net = DiffusionTransformer(parse_qwen2_args(hf_config(model, tok)))
    for name, p in net.named_parameters():
        if p.dim() == 2:
            std = 0.02 if "embed" in name else 0.02 / math.sqrt(1 if "proj" not in name else 2)
            torch.nn.init.normal_(p, std=std)
        elif name.endswith("bias"):
            torch.nn.init.zeros_(p)
    return net


def save_model(
    net: DiffusionTransformer,
    tok: Tokenizer,
    cfg: TrainConfig,
    out: Path,
    meta: dict[str, Any],
    shard_bytes: int | None = None,
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    config = hf_config(cfg.model, tok)
    state = {}
    for name, p in net.state_dict().items():
        if name == "lm_head.weight" and config["tie_word_embeddings"]:
            continue
        state[checkpoint_key(name)] = p.detach().to("cpu", torch.float16).contiguous()
    if shard_bytes is None:
        _write_single(state, out)
    else:
        _write_shards(state, out, shard_bytes)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_tokenizer(tok, out, model_max_length=cfg.model.max_position_embeddings)
    (out / "training_meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def _write_single(state: dict[str, torch.Tensor], out: Path) -> None:
    tmp = out / "model.safetensors.tmp"
    save_file(state, str(tmp), metadata={"format": "pt"})
    tmp.replace(out / "model.safetensors")
    (out / "model.safetensors.index.json").unlink(missing_ok=True)  # it would win over the file


def _write_shards(state: dict[str, torch.Tensor], out: Path, shard_bytes: int) -> None:
    """Greedy shards in key order, each under `shard_bytes` (a tensor larger than that alone is
    a ValueError). The index is written last, so a reader never sees it name a missing shard."""
    groups: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for key, t in state.items():
        n = t.numel() * t.element_size()
        if n > shard_bytes:
            raise ValueError(f"{key} alone is {n:,} bytes, over the shard limit {shard_bytes:,}")
        if groups[-1] and size + n > shard_bytes:
            groups.append({})
            size = 0
        groups[-1][key] = t
        size += n
    weight_map = {}
    for k, group in enumerate(groups, 1):
        name = f"model-{k:05d}-of-{len(groups):05d}.safetensors"
        tmp = out / (name + ".tmp")
        save_file(group, str(tmp), metadata={"format": "pt"})
        tmp.replace(out / name)
        weight_map.update(dict.fromkeys(group, name))
    total = sum(t.numel() * t.element_size() for t in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    tmp = out / "model.safetensors.index.json.tmp"
    tmp.write_text(json.dumps(index, indent=2) + "\n")
    tmp.replace(out / "model.safetensors.index.json")
    (out / "model.safetensors").unlink(missing_ok=True)
    for old in out.glob("model-*-of-*.safetensors"):
        if old.name not in weight_map.values():
            old.unlink()


def warm_start(
    init: Path, cfg: TrainConfig
) -> tuple[DiffusionTransformer, Tokenizer, list[Any], TrainConfig]:
    """Model, tokenizer, earlier stages and recipe of a model dir this repo trained.

    The weights load through the same loader as any checkpoint. The architecture and vocabulary
    of the returned recipe are the directory's, so the two always agree; the schedule, seed and
    corpus stay those of `cfg`. Raises ValueError for a directory this trainer did not write.
    """
    from infill_engine.loader import load_model_dir

    meta_path = init / "training_meta.json"
    if not meta_path.is_file():
        raise ValueError(f"--init {init}: no training_meta.json; only dirs from this trainer")
    meta = json.loads(meta_path.read_text())
    made = TrainConfig.from_dict(meta["config"])
    cfg = dataclasses.replace(cfg, model=made.model, vocab_size=made.vocab_size)
    tok = Tokenizer.from_file(str(init / "tokenizer.json"))
    loaded = load_model_dir(init, torch.device("cpu"), torch.float32, with_tokenizer=False)
    if loaded.mask_id != special_ids(tok)[1]:
        raise ValueError(f"--init {init}: tokenizer and config disagree on the mask id")
    stages = list(meta.get("stages", [])) or [{k: v for k, v in meta.items() if k != "config"}]
    return loaded.model, tok, stages, cfg
