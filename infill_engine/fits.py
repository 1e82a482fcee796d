"""Does a model fit: its weights at a precision, the cache per row at a context, and the largest
batch the device's free memory holds, from config.json alone, before anything loads.

This module owns the memory arithmetic of `dllm-infill check` and of the service's start-up
check. The model of memory, per the code that runs:

- weights: `parameter_count` (models/shapes.py) at the load precision; with `--quantize`
  (quantize.py) the block linears (attention q/k/v/o, the MLPs, every expert; routers excluded)
  become int8 with one scale per output row, or int4 with a scale and a zero point per group of
  128 inputs, while the embedding, the output head and the norms stay at the load precision;
- the K/V cache per row (cache.py): keys and values of every layer for `context + 1` positions,
  `2 x layers x kv_heads x head_dim` values per position at the load precision (quantization
  leaves it alone);
- the working memory per row of one full pass (the largest the runner makes, at a block start):
  the hidden states and the MLP's intermediates of `context` tokens and the fp32 logits of the
  scored positions (up to the longest span);
- while a quantized model loads, one block at the load precision before it is quantized
  (loader.build_model quantizes block by block on the device);
- a reserve for the allocator and the runtime (CUDA: 512 MiB; CPU: 1 GiB for the process).

The largest batch is (free - reserve - weights) // (cache + working memory per row).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from typing import Any

from .model_names import HubError, HubName
from .models.common import ModelArgs
from .models.shapes import parameter_count

GB = 1e9
MIB = 1 << 20
QUANTIZE_MODES = ("none", "int8", "int4")
INT4_GROUP = 128
SCORED = 128  # the longest span the language server asks for: logits rows per row
# The language server's default context (options.py): prefix 1024 + suffix 512 + other files
# 512 + the span 128 tokens.
DEFAULT_CONTEXT = 1024 + 512 + 512 + 128
RESERVE = {"cuda": 512 * MIB, "cpu": 1024 * MIB}
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


class FitError(ValueError):
    """The model does not fit; the message gives the numbers and what would make it fit."""


@dataclass(frozen=True)
class Fit:
    """The memory figures of one model on one device, in bytes."""

    params: int
    quantize: str
    dtype: str
    weights: int
    cache_per_row: int
    work_per_row: int
    context: int
    free: int
    reserve: int
    batch: int  # the batch asked for
    # loading quantized, one block is on the device at the load precision before it is
    # quantized (loader.build_model): its bytes beyond the quantized block's
    load_extra: int = 0

    @property
    def per_row(self) -> int:
        return self.cache_per_row + self.work_per_row

    @property
    def largest_batch(self) -> int:
        room = self.free - self.reserve - self.weights
        return max(0, room // self.per_row) if room > 0 else 0

    @property
    def fits(self) -> bool:
        loads = self.free - self.reserve - self.weights >= self.load_extra
        return loads and self.largest_batch >= self.batch

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per_row": self.per_row, "largest_batch": self.largest_batch,
                "fits": self.fits}  # fmt: skip


def block_linears(args: ModelArgs) -> tuple[int, int]:
    """(weights, output rows) of the linear layers quantization changes, over all blocks."""
    d, hd = args.hidden_size, args.head_dim
    q, kv = args.num_heads * hd, args.num_kv_heads * hd
    attn = (d * (q + 2 * kv) + q * d, q + 2 * kv + d)

    def swiglu(width: int) -> tuple[int, int]:
        return (3 * d * width, 2 * width + d) if width else (0, 0)

    if args.num_experts:
        one, shared = swiglu(args.intermediate_size), swiglu(args.shared_expert_size)
        mlp = (args.num_experts * one[0] + shared[0], args.num_experts * one[1] + shared[1])
    else:
        mlp = swiglu(args.intermediate_size)
    dense = min(args.dense_layers, args.num_layers)
    dense_mlp = swiglu(args.dense_intermediate_size)
    moe = args.num_layers - dense
    weights = args.num_layers * attn[0] + moe * mlp[0] + dense * dense_mlp[0]
    rows = args.num_layers * attn[1] + moe * mlp[1] + dense * dense_mlp[1]
    return weights, rows


def weight_bytes(args: ModelArgs, quantize: str, dtype_bytes: int) -> int:
    total = parameter_count(args)
    if quantize == "none":
        return total * dtype_bytes
    linear, rows = block_linears(args)
    rest = (total - linear) * dtype_bytes
    if quantize == "int8":
        return rest + linear + rows * dtype_bytes
    return rest + linear // 2 + (linear // INT4_GROUP) * 2 * dtype_bytes


def block_extra(args: ModelArgs, quantize: str, dtype_bytes: int) -> int:
    """The transient bytes of loading quantized: one block's linears at the load precision,
    less what they take quantized."""
    if quantize == "none":
        return 0
    one = replace(args, num_layers=1, dense_layers=min(args.dense_layers, 1))
    linear, rows = block_linears(one)
    if quantize == "int8":
        return linear * dtype_bytes - (linear + rows * dtype_bytes)
    return linear * dtype_bytes - (linear // 2 + (linear // INT4_GROUP) * 2 * dtype_bytes)


def cache_bytes(args: ModelArgs, context: int, dtype_bytes: int) -> int:
    """One row's K/V cache: keys and values of every layer at `context + 1` positions."""
    return 2 * args.num_layers * args.num_kv_heads * args.head_dim * (context + 1) * dtype_bytes


def work_bytes(args: ModelArgs, context: int, dtype_bytes: int) -> int:
    """One row's share of a full pass: hidden states (about six of them live: the residual, the
    norm, q, k, v, the attention output), the MLP's two intermediates, and fp32 logits."""
    width = args.intermediate_size * max(1, args.experts_per_token) + args.shared_expert_size
    width = max(width, args.dense_intermediate_size)
    per_token = 6 * args.hidden_size + 2 * width
    return context * per_token * dtype_bytes + min(SCORED, context) * args.vocab_size * 4


def estimate(
    args: ModelArgs,
    *,
    device: str,
    free: int,
    quantize: str = "none",
    dtype: str = "auto",
    context: int = DEFAULT_CONTEXT,
    batch: int = 1,
) -> Fit:
    if quantize not in QUANTIZE_MODES:
        raise ValueError(f"quantize must be one of {', '.join(QUANTIZE_MODES)}, got {quantize!r}")
    if context < 1 or batch < 1:
        raise ValueError("context and batch must be >= 1")
    kind = device.split(":")[0]
    if kind not in RESERVE:
        raise ValueError(f"device must be cuda or cpu, got {device!r}")
    if dtype == "auto":
        dtype = "bfloat16" if kind == "cuda" else "float32"
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be auto or one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")
    b = DTYPE_BYTES[dtype]
    return Fit(
        params=parameter_count(args), quantize=quantize, dtype=dtype,
        weights=weight_bytes(args, quantize, b), cache_per_row=cache_bytes(args, context, b),
        work_per_row=work_bytes(args, context, b), context=context, free=free,
        reserve=RESERVE[kind], batch=batch, load_extra=block_extra(args, quantize, b),
    )  # fmt: skip


def remedies(fit: Fit, args: ModelArgs) -> list[str]:
    """The options that would make `fit` fit, each with the batch it then allows."""
    out: list[str] = []
    for mode in QUANTIZE_MODES[QUANTIZE_MODES.index(fit.quantize) + 1 :]:
        b = DTYPE_BYTES[fit.dtype]
        q = replace(fit, quantize=mode, weights=weight_bytes(args, mode, b),
                    load_extra=block_extra(args, mode, b))  # fmt: skip
        if q.fits:
            out.append(
                f"--quantize {mode} (weights {gb(q.weights)}, batch up to {q.largest_batch})"
            )
            break
    context = fit.context
    while context > 256:
        context //= 2
        b = DTYPE_BYTES[fit.dtype]
        c = replace(fit, context=context, cache_per_row=cache_bytes(args, context, b),
                    work_per_row=work_bytes(args, context, b))  # fmt: skip
        if c.fits:
            out.append(f"--context {context} (batch up to {c.largest_batch})")
            break
    if 0 < fit.largest_batch < fit.batch:
        out.append(f"--batch {fit.largest_batch}")
    return out


def explain(fit: Fit, args: ModelArgs, label: str, device: str) -> list[str]:
    """The report, one line per figure."""
    head = "embedding and head " if fit.quantize != "none" else ""
    prec = fit.quantize if fit.quantize != "none" else fit.dtype
    lines = [
        f"model      {label}, {parameters(fit.params)} parameters",
        f"device     {device}, {gb(fit.free)} free ({gb(fit.reserve)} kept in reserve)",
        f"weights    {gb(fit.weights)} at {prec}" + (f" ({head}{fit.dtype})" if head else ""),
        f"K/V cache  {gb(fit.cache_per_row)} per row at {fit.context} tokens of context",
        f"working    {gb(fit.work_per_row)} per row (one full pass)",
        f"batch      {fit.batch} asked, up to {fit.largest_batch} fit",
    ]
    if fit.load_extra:
        lines.insert(3, f"loading    {gb(fit.load_extra)} more for one block at {fit.dtype}")
    if fit.fits:
        return [*lines, "fits"]
    fixes = remedies(fit, args)
    need = fit.weights + max(fit.batch * fit.per_row, fit.load_extra) + fit.reserve
    why = f"needs {gb(need)}, {gb(fit.free)} free"
    fix = "; would fit with " + ", or ".join(fixes) if fixes else "; nothing here makes it fit"
    return [*lines, f"does not fit: {why}{fix}"]


def model_args(model: str | HubName, qwen2_as_diffusion: bool = False) -> tuple[str, ModelArgs]:
    """(family name, ModelArgs) of "builtin", a directory, a Hub name (its config.json alone is
    fetched; a HubName is one located already) or `shape:NAME` (models/shapes.py: a released
    checkpoint's shape)."""
    from . import hub
    from .loader import ModelLoadError, locate, pick_family, read_config

    if isinstance(model, str) and model.startswith("shape:"):
        from .models.shapes import shape_args

        family, args, _ = shape_args(model[len("shape:") :])
        return family.name, args
    where = locate(model)  # the loader's rule: a Hub name beside a folder is the Hub's
    if isinstance(where, HubName):
        try:
            config = hub.fetch_config(where)
        except HubError as e:
            raise ModelLoadError(str(e)) from None
    else:
        config = read_config(where)
    family = pick_family(config, qwen2_as_diffusion)
    try:
        return family.name, family.parse_args(config)
    except (TypeError, ValueError) as e:
        raise ModelLoadError(f"{model}: config.json: {e}") from e


def gb(n: float) -> str:
    return f"{n / GB:.2f} GB"


def parameters(n: float) -> str:
    """A parameter count in the unit that suits it: "7.62 B", "3.2 M", "850 K"."""
    if n >= 1e9:
        return f"{n / 1e9:.2f} B"
    if n >= 1e6:
        return f"{n / 1e6:.1f} M"
    return f"{n / 1e3:.0f} K" if n >= 1e3 else f"{n:.0f}"


def free_memory(device: str) -> int:
    """Bytes free on `device` now: CUDA's own count, or the kernel's MemAvailable."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ValueError("device cuda was asked for but CUDA is not available (use --memory)")
        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
