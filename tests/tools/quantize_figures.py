"""The figures of docs/engine.md's quantization section, measured on this machine.

    .venv/bin/python tests/tools/quantize_figures.py [--holes 60] [--device cpu] [--no-7b]

1. Logits of tiny random checkpoints of every family (the test suite's makers), int8 and int4
   against the load precision: ‖Δ‖₂/‖logits‖₂, the largest |Δ|, and top-1 agreement.
2. The builtin model: the same holes filled with and without quantization (a line each, cursor
   after its indentation, span 24, threshold decoding, dual cache): identical fills and the share
   of span tokens that agree; weight memory; mean wall time per fill.
3. Random weights of Dream-7B's shape cut to 2 layers (bench --random-init --shape dream-7b
   --layers 2): weight memory, one full pass over a 256-token canvas and one 32-token block pass.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import torch

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "engine")]

from infill_engine import InfillParams, load  # noqa: E402
from infill_engine.quantize import quantize_model, weight_bytes  # noqa: E402

MODES = ("none", "int8", "int4")


def family_logits() -> None:
    from conftest import VOCAB, make_dream, make_llada
    from test_coda import make_coda
    from test_llada2 import make_llada2
    from test_llada_moe import make_llada_moe
    from test_quantize import make_qwen2_diffusion

    makers = {"dream": make_dream, "llada": make_llada,
              "coda": lambda p: make_coda(p, stored_head=True),
              "qwen2-diffusion": make_qwen2_diffusion, "llada-moe": make_llada_moe,
              "llada2": make_llada2}  # fmt: skip
    ids = torch.randint(0, VOCAB, (2, 33), generator=torch.Generator().manual_seed(5))
    print("| family | mode | ‖Δ‖/‖logits‖ | max abs Δ (max abs logit) | top-1 agree |")
    print("|---|---|---|---|---|")
    for family, make in makers.items():
        path = Path(tempfile.mkdtemp(prefix=family))
        make(path)
        q2 = family == "qwen2-diffusion"
        want = load(str(path), device="cpu", qwen2_as_diffusion=q2).logits(ids)
        for mode in MODES[1:]:
            got = load(str(path), device="cpu", qwen2_as_diffusion=q2, quantize=mode).logits(ids)
            d = got - want
            top1 = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
            rel, worst, scale = (d.norm() / want.norm()).item(), d.abs().max(), want.abs().max()
            print(f"| {family} | {mode} | {rel:.4f} | {worst:.3f} ({scale:.3f}) | {top1:.3f} |")


def holes(n: int) -> list[tuple[str, str]]:
    """`n` line holes spread over a few fixed Python files (this repo's sample, the stdlib's)."""
    files = [TESTS.parent / "examples" / "bench_sample.py", Path(textwrap.__file__),
             Path(shlex.__file__), Path(json.__file__)]  # fmt: skip
    spots: list[tuple[str, str]] = []
    for f in files:
        text = f.read_text()
        lines = text.split("\n")
        offset = 0
        for line in lines:
            body = line.strip()
            if len(body) > 8 and not body.startswith(("#", '"', "'")):
                cursor = offset + len(line) - len(line.lstrip())
                spots.append((text[:cursor], text[offset + len(line) :]))
            offset += len(line) + 1
    step = max(1, len(spots) // n)
    return spots[::step][:n]


# (quantize, dtype) rows: int4 on the CPU is fast only with bf16 activations (PyTorch's int4
# kernel); fp32 int4 is timed on a few holes only
ROWS = (("none", "fp32"), ("int8", "fp32"), ("int4", "fp32"), ("none", "bf16"), ("int4", "bf16"))


def builtin_agreement(n: int, device: str) -> None:
    spots = holes(n)
    params = InfillParams(span=24, decode="threshold", cache="dual")
    base: list[list[int]] = []
    print(f"\nbuiltin model, {len(spots)} holes, device {device}; agreement against none/fp32")
    print("| mode | dtype | weights MiB | ms per fill | identical fills | span tokens agreeing |")
    print("|---|---|---|---|---|---|")
    for mode, dtype in ROWS:
        engine = load("builtin", device=device, dtype=dtype, quantize=mode)
        engine.infill(*spots[0], params)  # warm
        some = spots if (mode, dtype) != ("int4", "fp32") else spots[:5]
        t0 = time.perf_counter()
        results = [engine.infill(p, s, params) for p, s in some]
        ms = (time.perf_counter() - t0) * 1000 / len(some)
        fills = [list(r.token_ids) for r in results]
        base = base or fills
        agree = [
            sum(x == y for x, y in zip(a, b, strict=False)) / max(len(a), len(b)) if a or b else 1.0
            for a, b in zip(fills, base, strict=False)
        ]
        same = sum(a == b for a, b in zip(fills, base, strict=False))
        print(f"| {mode} | {dtype} | {weight_bytes(engine.model) / 2**20:.1f} | {ms:.0f} | "
              f"{same}/{len(some)} | {statistics.mean(agree):.3f} |", flush=True)  # fmt: skip
        engine.close()


def dream_7b(device: str) -> None:
    """Each row built, timed and dropped in turn (one 7B-wide network in memory at a time);
    the pass times are the fastest of `time_passes`' medians over three rounds."""
    from dllm_lab.bench import shaped_engine
    from dllm_lab.pass_timing import Ceilings, time_passes

    print(f"\nrandom dream-7b shape, 2 layers, device {device}")
    print(
        "| mode | dtype | weights GiB | full pass, 256 tokens (ms) | block pass, 32 tokens (ms) |"
    )
    print("|---|---|---|---|---|")
    for mode, dtype in (("none", "fp32"), ("int8", "fp32"), ("none", "bf16"), ("int4", "bf16")):
        base = load("builtin", device=device, dtype=dtype)
        engine, _ = shaped_engine(base, "dream-7b", 2, seed=0)
        quantize_model(engine.model, mode)
        best: dict[str, float] = {}
        for _ in range(3):
            for r in time_passes(engine.model, [256], 32, [1], Ceilings(1.0, 1.0), reps=3):
                best[r.kind] = min(best.get(r.kind, float("inf")), r.ms)
        print(f"| {mode} | {dtype} | {weight_bytes(engine.model) / 2**30:.2f} | "
              f"{best['full']:.0f} | {best['block']:.0f} |", flush=True)  # fmt: skip
        del engine, base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--holes", type=int, default=60)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-7b", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    family_logits()
    builtin_agreement(a.holes, a.device)
    if not a.no_7b:
        dream_7b(a.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
