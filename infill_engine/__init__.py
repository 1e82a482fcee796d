"""infill_engine: fill a masked span between a prefix and a suffix with a diffusion LM.

engine = load("builtin")                       # or an HF-format directory
result = engine.infill(prefix, suffix, InfillParams(span=32))
result.text, result.nfe_full, result.nfe_block, result.stop_reason

The package's names are imported on first use (PEP 562 `__getattr__`), and torch only by the
modules that run the model: a client of the engine service that needs the params, the planner
or the wire (the language server with `engineAddress`) imports this package without torch.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .lazy import exports

if TYPE_CHECKING:
    import torch

    from .engine import Engine
    from .loader import ModelLoadError
    from .model_names import HubName
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

# a lazily imported name -> the module that defines it
_HOMES = {
    "Engine": "engine",
    "ModelLoadError": "loader",
    "InfillParams": "params",
    "InfillResult": "params",
    "InfillRequest": "request",
}

_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}


__getattr__, __dir__ = exports(__name__, _HOMES, __all__)


def pick_device(device: str = "auto", dtype: str = "auto") -> tuple[torch.device, torch.dtype]:
    """ "auto": CUDA with bf16 when available, else the CPU with fp32 (bf16 is very slow there)."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but CUDA is not available")
    if dtype == "auto":
        return dev, torch.bfloat16 if dev.type == "cuda" else torch.float32
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be 'auto' or one of {sorted(_DTYPES)}, got {dtype!r}")
    return dev, getattr(torch, _DTYPES[dtype])


def load(
    model: str | os.PathLike[str] | HubName = "builtin",
    device: str = "auto",
    dtype: str = "auto",
    qwen2_as_diffusion: bool = False,
    quantize: str = "none",
) -> Engine:
    """Load "builtin", an HF-format directory, or ORG/NAME[@REVISION] (hub.py). No remote code.
    `quantize` ("none", "int8", "int4") quantizes the block weights once loaded (quantize.py)."""
    from .engine import Engine
    from .loader import load_model_dir
    from .quantize import check_mode

    dev, dt = pick_device(device, dtype)
    check_mode(quantize)  # before the weights are read: a bad mode or no torchao fails at once
    loaded = load_model_dir(
        model, dev, dt, qwen2_as_diffusion=qwen2_as_diffusion, quantize=quantize
    )
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
