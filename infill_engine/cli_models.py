"""`dllm-infill models` and `dllm-infill check`: the models a user has, and whether one fits.

- `models` lists the snapshots in the Hugging Face cache (hub.py) whose config.json names a
  supported family, with their size on disk and whether every file the loader reads is there.
- `check` prints fits.py's figures for a model on a device (weights at the precision, the K/V
  cache per row at the context, the largest batch the free memory holds) and fails, with the
  options that would make it fit, when it does not; `serve` runs the same check at start-up
  (`startup_check`) before anything loads.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from .model_names import HubName, quoted


def models(argv: list[str]) -> int:
    from . import hub
    from .loader import ModelLoadError, pick_family, read_config

    ap = argparse.ArgumentParser(
        prog="dllm-infill models",
        description=f"Checkpoints of supported families in the Hugging Face cache "
        f"({hub.cache_dir()}); serve one with --model ORG/NAME[@REVISION].",
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for repo, commit, refs, path, size in hub.snapshots():
        try:
            config = read_config(path)
            family = pick_family(config, qwen2_as_diffusion=True).name
        except ModelLoadError:
            continue  # not a family the engine loads
        if config.get("model_type") == "qwen2":
            family += " (with --qwen2-diffusion)"
        rows.append({
            "name": repo, "commit": commit, "refs": refs, "family": family, "bytes": size,
            "complete": not hub.missing_files(path), "path": str(path),
        })  # fmt: skip
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no checkpoints of supported families in {hub.cache_dir()}", file=sys.stderr)
        return 0
    for r in rows:
        at = r["refs"][0] if r["refs"] else r["commit"][:12]
        state = "" if r["complete"] else "  (partial: run again online to finish)"
        on_disk = hub.human_size(r["bytes"])
        print(f"{r['name'] + '@' + at:<48} {r['family']:<12} {on_disk:>9}{state}")
    return 0


def check(argv: list[str]) -> int:
    from . import fits
    from .loader import ModelLoadError

    ap = OneLineParser(
        prog="dllm-infill check",
        description="Does a model fit: weights at the precision, the K/V cache per row at the "
        "context, the largest batch the device's free memory holds. Reads config.json only.",
    )
    ap.add_argument("--model", default="builtin", help="builtin, a directory, ORG/NAME[@REV]")
    ap.add_argument("--shape", help="a released checkpoint's shape instead (e.g. dream-7b)")
    ap.add_argument("--device", default="auto", help="cuda, cuda:N or cpu (auto: cuda if any)")
    ap.add_argument("--dtype", default="auto", help="auto: bfloat16 on CUDA, float32 on the CPU")
    ap.add_argument("--quantize", choices=fits.QUANTIZE_MODES, default="none")
    ap.add_argument("--context", type=count("tokens", MAX_CONTEXT), help="tokens per row, at "
                    f"most the model's positions (default {fits.DEFAULT_CONTEXT}, or its positions "
                    "if fewer)")  # fmt: skip
    ap.add_argument("--batch", type=count("rows", MAX_BATCH), default=1,
                    help="rows decoded together")  # fmt: skip
    ap.add_argument("--memory", type=gigabytes, help="GB free to plan for (default: measured)")
    ap.add_argument("--qwen2-diffusion", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    model = f"shape:{a.shape}" if a.shape else a.model
    try:
        device = _device(a.device)
        free = int(a.memory * fits.GB) if a.memory is not None else fits.free_memory(device)
        family, args = fits.model_args(model, a.qwen2_diffusion)
        context = min(fits.DEFAULT_CONTEXT, args.max_positions) if a.context is None else a.context
        if context > args.max_positions:
            raise ValueError(
                f"--context {context} exceeds the model's {args.max_positions} positions"
            )
        result = fits.estimate(
            args, device=device, free=free, quantize=a.quantize, dtype=a.dtype,
            context=context, batch=a.batch,
        )  # fmt: skip
    except (ModelLoadError, ValueError, OSError) as e:
        print(f"dllm-infill check: {e}", file=sys.stderr)
        return 2
    label = f"{a.shape or a.model}: {family}"
    if a.json:
        out = {"model": a.shape or a.model, "family": family, "device": device,
               **result.as_dict(), "remedies": fits.remedies(result, args)}  # fmt: skip
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(fits.explain(result, args, label, device)))
    return 0 if result.fits else 1


# Bounds of `check`'s numbers: past them a value is a typo, not a plan (the arithmetic would
# overflow a float long before).
MAX_CONTEXT = 1 << 24  # tokens: more positions than any model has
MAX_BATCH = 1 << 20
MAX_MEMORY_GB = 1e6  # a petabyte


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose mistakes are one line, `PROG: what is wrong` (exit 2), without
    the usage block (`--help` shows it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


def gigabytes(text: str) -> float:
    """`--memory`: a finite number of GB, above 0 and at most MAX_MEMORY_GB."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_MEMORY_GB):
        raise argparse.ArgumentTypeError(
            f"must be a number of GB above 0 and at most {MAX_MEMORY_GB:.0f}, got {quoted(text)}"
        )
    return value


def count(what: str, most: int) -> Callable[[str], int]:
    """A type for a whole number of `what` from 1 to `most` (no 1e12, no 2.5)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # not a whole number (or past int's digit limit)
            value = 0
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(
                f"must be a whole number of {what} from 1 to {most}, got {quoted(text)}"
            )
        return value

    return parse


def startup_check(
    model: str | HubName, device: str, dtype: str, quantize: str, batch: int, qwen2: bool
) -> str:
    """The service's check before it loads: one line of figures, or a FitError whose message
    has them and the options that would make the model fit. `model` may be located already."""
    from . import fits

    dev = _device(device)
    family, args = fits.model_args(model, qwen2)
    result = fits.estimate(
        args, device=dev, free=fits.free_memory(dev), quantize=quantize, dtype=dtype, batch=batch,
        context=min(fits.DEFAULT_CONTEXT, args.max_positions),
    )  # fmt: skip
    if not result.fits:
        lines = fits.explain(result, args, f"{model}: {family}", dev)
        raise fits.FitError(f"{lines[-1]} ({lines[2].split(None, 1)[1]}; --max-batch is the batch)")
    return (
        f"memory: weights {fits.gb(result.weights)}, {fits.gb(result.per_row)} per row at "
        f"{result.context} tokens, up to {result.largest_batch} rows fit in "
        f"{fits.gb(result.free)} free on {dev} (--max-batch {batch})"
    )


def _device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
