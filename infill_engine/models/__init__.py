"""Model families: one `DiffusionTransformer`, many checkpoint layouts."""

from .coda import CODA
from .common import DiffusionTransformer, KVStore, ModelArgs
from .dream import DREAM, QWEN2_DIFFUSION
from .family import Family
from .llada import LLADA
from .llada2 import LLADA2
from .llada_moe import LLADA_MOE
from .mmada import MMADA

# LLADA_MOE before LLADA: both read model_type "llada"; LLADA_MOE takes those with experts.
FAMILIES: tuple[Family, ...] = (DREAM, LLADA_MOE, LLADA, CODA, LLADA2, MMADA)
"""Families recognised from config.json alone. QWEN2_DIFFUSION is opt-in (see loader)."""

__all__ = [
    "CODA",
    "DREAM",
    "FAMILIES",
    "LLADA",
    "LLADA2",
    "LLADA_MOE",
    "MMADA",
    "QWEN2_DIFFUSION",
    "DiffusionTransformer",
    "Family",
    "KVStore",
    "ModelArgs",
]
