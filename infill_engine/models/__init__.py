"""Model families: one `DiffusionTransformer`, many checkpoint layouts."""

from .coda import CODA
from .common import DiffusionTransformer, KVStore, ModelArgs
from .dream import DREAM, QWEN2_DIFFUSION
from .family import Family
from .llada import LLADA

FAMILIES: tuple[Family, ...] = (DREAM, LLADA, CODA)
"""Families recognised from config.json alone. QWEN2_DIFFUSION is opt-in (see loader)."""

__all__ = [
    "CODA",
    "DREAM",
    "FAMILIES",
    "LLADA",
    "QWEN2_DIFFUSION",
    "DiffusionTransformer",
    "Family",
    "KVStore",
    "ModelArgs",
]
