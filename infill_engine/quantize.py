"""Weight-only quantization of a loaded model (`--quantize int8|int4`), through torchao.

This module owns which layers are quantized and with which torchao config; the kernels are
torchao's and PyTorch's, none are written here. Only the linear layers inside the transformer
blocks change (attention q/k/v/o, the MLP and every expert):

- the embedding and the output head stay at the load precision: the head's logits are the
  confidences the threshold rule commits on, and a tied head is the embedding itself;
- an MoE router (`mlp.gate`) stays too: a small error there moves a token to another expert,
  and LLaDA2's sigmoid router runs in fp32 on purpose (models/common.py).

Modes:
- `int8`: per-row symmetric int8 weights (`Int8WeightOnlyConfig`), on the CPU and on CUDA.
- `int4`: groupwise int4 (groups of 128 input channels, or 64/32 where a layer is narrower),
  two weights to a byte. On CUDA it is `Int4WeightOnlyConfig` in the tinygemm tile layout, which
  needs bf16 activations; on the CPU torchao's `Int4OpaqueTensor` (its prototype CPU layout),
  which runs PyTorch's `_weight_int4pack_mm_for_cpu`.

Activations stay at the load precision (weight-only), so a pass costs the same FLOPs and reads
a half or a quarter of the weight bytes: the gain is memory, and speed where a pass is bound by
reading the weights (a GPU at small batch). docs/engine.md has the figures.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

QUANTIZE_MODES = ("none", "int8", "int4")
INT4_GROUPS = (128, 64, 32)  # the largest that divides a layer's input width is used
INSTALL = "pip install 'dllm-infill[quant]'"
log = logging.getLogger(__name__)


class QuantizeError(ValueError):
    """A quantization that cannot be applied; the message says why and what to do."""


@dataclass(frozen=True)
class QuantizeReport:
    mode: str
    layers: int  # linear layers now holding quantized weights
    kept: tuple[str, ...]  # block linears left at the load precision (no group size fits)
    bytes_before: int  # parameter bytes of the whole model (embedding and head included)
    bytes_after: int


def check_mode(mode: str) -> str:
    """`mode` if it is one of QUANTIZE_MODES and torchao is there for it: checked before a
    model loads, so that a missing library fails in a second, not after the weights are read."""
    if mode not in QUANTIZE_MODES:
        raise QuantizeError(f"quantize must be one of {', '.join(QUANTIZE_MODES)}, got {mode!r}")
    if mode != "none":
        _torchao()
    return mode


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor holds, looking inside torchao's subclasses (packed data, scales, zeros)."""
    flatten = getattr(t, "__tensor_flatten__", None)
    if flatten is None or type(t) in (torch.Tensor, nn.Parameter):
        return t.numel() * t.element_size()
    names, _ = flatten()
    return sum(tensor_bytes(getattr(t, n)) for n in names if getattr(t, n) is not None)


def weight_bytes(model: nn.Module) -> int:
    """Parameter and buffer bytes of `model`; a tied weight counts once."""
    tensors = [*model.parameters(), *model.buffers()]
    return sum(tensor_bytes(t) for t in tensors)


def is_quantized(weight: torch.Tensor) -> bool:
    """True for a torchao quantized tensor (a subclass holding int8 or packed int4 data)."""
    return type(weight) not in (torch.Tensor, nn.Parameter) and hasattr(weight, "qdata")


def block_linears(model: nn.Module) -> Iterator[tuple[str, nn.Linear]]:
    """The linear layers that quantization changes: inside `layers.*`, routers excluded."""
    for name, module in model.named_modules():
        if (
            isinstance(module, nn.Linear)
            and name.startswith("layers.")
            and not name.endswith(".gate")
        ):
            yield name, module


def quantize_model(model: nn.Module, mode: str) -> QuantizeReport:
    """Quantize `model`'s block linears in place (weights already loaded, on their device)."""
    check_mode(mode)
    before = weight_bytes(model)
    if mode == "none":
        return QuantizeReport(mode, 0, (), before, before)
    ao = _torchao()
    targets = dict(block_linears(model))
    device, dtype = _device_dtype(targets)
    if mode == "int4" and device.type == "cpu" and dtype != torch.bfloat16:
        _warn_slow_int4(str(dtype).removeprefix("torch."))
    kept: list[str] = []
    with torch.no_grad():
        for config, names in _plan(ao, mode, targets, device, dtype, kept):
            try:
                ao.quantize_(model, config, filter_fn=lambda _m, fqn, names=names: fqn in names)
            except (RuntimeError, AssertionError, NotImplementedError, ImportError) as e:
                msg = f"{mode} on {device.type} ({dtype}): torchao refused: {e}"
                raise QuantizeError(msg) from None
    done = sum(is_quantized(m.weight) for m in targets.values())
    return QuantizeReport(mode, done, tuple(kept), before, weight_bytes(model))


@functools.cache
def _warn_slow_int4(dtype: str) -> None:
    """Said once per process: the loader quantizes a model one block at a time."""
    log.warning(
        "int4 on the CPU with %s activations runs PyTorch's slow int4 path (about 40x slower "
        "than with bf16 here: docs/engine.md); --dtype bf16 makes it fast",
        dtype,
    )


def _plan(
    ao: Any,
    mode: str,
    targets: dict[str, nn.Linear],
    device: torch.device,
    dtype: torch.dtype,
    kept: list[str],
) -> list[tuple[Any, set[str]]]:
    """(torchao config, the layer names it applies to): one config for int8, one per group
    size for int4. Names no group size divides go to `kept`."""
    if mode == "int8":
        return [(ao.Int8WeightOnlyConfig(set_inductor_config=False), set(targets))]
    if device.type == "cuda" and dtype != torch.bfloat16:
        raise QuantizeError(f"int4 on CUDA needs bf16 weights (dtype auto or bf16), not {dtype}")
    if device.type not in ("cuda", "cpu"):
        raise QuantizeError(f"int4 runs on the CPU or CUDA, not {device.type}")
    groups: dict[int, set[str]] = {}
    for name, layer in targets.items():
        size = next((g for g in INT4_GROUPS if layer.in_features % g == 0), None)
        if size is None:
            kept.append(name)
        else:
            groups.setdefault(size, set()).add(name)
    return [(_int4_config(ao, device, size), names) for size, names in groups.items()]


def _int4_config(ao: Any, device: torch.device, group_size: int) -> Any:
    if device.type == "cuda":  # tinygemm's tile layout (PyTorch's _weight_int4pack_mm)
        return ao.Int4WeightOnlyConfig(
            group_size=group_size,
            int4_packing_format="tile_packed_to_4d",
            set_inductor_config=False,
        )
    from torchao.prototype.quantization.int4.inference_workflow import (
        PrototypeInt4WeightOnlyConfig,
    )

    return PrototypeInt4WeightOnlyConfig(group_size=group_size, set_inductor_config=False)


def _device_dtype(targets: dict[str, nn.Linear]) -> tuple[torch.device, torch.dtype]:
    if not targets:
        raise QuantizeError("the model has no linear layers to quantize")
    weight = next(iter(targets.values())).weight
    if is_quantized(weight):
        raise QuantizeError("the model is quantized already")
    return weight.device, weight.dtype


def _torchao() -> Any:
    """torchao's quantization API. Its import warns about its CUDA-only extensions on a CPU
    build of PyTorch (harmless: the CPU path does not use them), so those logs are held back."""
    quiet = [logging.getLogger(n) for n in ("torchao", "torch.utils._pytree")]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.ERROR)
    try:
        import torchao.quantization as ao
    except ImportError as e:
        raise QuantizeError(f"quantization needs torchao: {INSTALL} ({e})") from None
    finally:
        for q, level in zip(quiet, levels, strict=True):
            q.setLevel(level)
    return ao
