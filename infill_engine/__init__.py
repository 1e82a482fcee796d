"""infill_engine: fill a masked span between a prefix and a suffix with a diffusion LM.

engine = load("builtin")                       # or an HF-format directory
result = engine.infill(prefix, suffix, InfillParams(span=32))
result.text, result.nfe_full, result.nfe_block, result.stop_reason
"""

from __future__ import annotations

import os

import torch

from .engine import Engine
from .loader import ModelLoadError, load_model_dir
from .params import InfillParams, InfillResult
from .request import InfillRequest

__all__ = [
    "Engine",
    "InfillParams",
    "InfillRequest",
    "InfillResult",
    "ModelLoadError",
    "load",
    "pick_device",
]

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


def pick_device(device: str = "auto", dtype: str = "auto") -> tuple[torch.device, torch.dtype]:
    """ "auto": CUDA with bf16 when available, else the CPU with fp32 (bf16 is very slow there)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but CUDA is not available")
    if dtype == "auto":
        return dev, torch.bfloat16 if dev.type == "cuda" else torch.float32
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be 'auto' or one of {sorted(_DTYPES)}, got {dtype!r}")
    return dev, _DTYPES[dtype]


def load(
    model: str | os.PathLike[str] = "builtin",
    device: str = "auto",
    dtype: str = "auto",
    qwen2_as_diffusion: bool = False,
) -> Engine:
    """Load "builtin", an HF-format directory, or a hub id from the local cache. No remote code."""
    dev, dt = pick_device(device, dtype)
    loaded = load_model_dir(model, dev, dt, qwen2_as_diffusion=qwen2_as_diffusion)
    return Engine(
        loaded.model,
        loaded.tokenizer,
        loaded.mask_id,
        loaded.end_ids,
        family=loaded.family.name,
        path=loaded.path,
        threshold=loaded.threshold,
        expand_id=loaded.expand_id,
        delete_id=loaded.delete_id,
    )
