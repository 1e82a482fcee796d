"""Time one full pass and one block pass of a model against the machine's own measured ceilings.

The block loop spends its time in two kinds of forward pass (runner.py):
- a *full* pass over the whole canvas at each block start, which refreshes every K/V;
- a *block* pass over the block alone, attending to the cached K/V of prefix and suffix.
A block pass of a few dozen tokens is memory-bound: at batch 1 its floor is reading every weight
once (bf16: two bytes per parameter) plus the cached K/V. A full pass over a long canvas is
compute-bound. Each row below gives the median wall time of one pass, the least bytes it must read
and the FLOPs it must do, and the share of the roofline it reaches: max(bytes / bandwidth,
FLOPs / matmul rate) / time, with bandwidth and matmul rate measured in the same run on the same
device (a device-to-device copy and a square matmul in the model's dtype).

On CUDA the block pass is also timed as a CUDA graph replay (`graph=True`): the same kernels with
no per-kernel launch cost from Python, which is what a block pass at batch 1 is most exposed to.
A benchmark, not a test: it measures and prints.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from infill_engine.cache import KVCache
from infill_engine.models import DiffusionTransformer


@dataclass(frozen=True)
class Ceilings:
    bandwidth_gbs: float  # device-to-device copy: GB read + written per second
    matmul_tflops: float  # square matmul in the model's dtype


@dataclass(frozen=True)
class PassTime:
    kind: str  # "full", "block", "block graph"
    batch: int
    canvas: int  # positions per row
    tokens: int  # positions recomputed per row
    ms: float  # median wall time of one pass
    gbytes: float  # the least the pass reads: each weight once, plus the K/V it attends to
    gflop: float
    bw_ms: float  # gbytes at the measured bandwidth
    flop_ms: float  # gflop at the measured matmul rate
    of_limit: float  # max(bw_ms, flop_ms) / ms: the share of the roofline reached


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_ms(fn: Callable[[], object], device: torch.device, reps: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


@torch.inference_mode()
def measure_ceilings(device: torch.device, dtype: torch.dtype) -> Ceilings:
    cuda = device.type == "cuda"
    n = (1 << 30 if cuda else 1 << 26) // 4  # 1 GiB of fp32 on a GPU, 64 MiB on a CPU
    src = torch.ones(n, device=device)
    copy_ms = median_ms(partial(torch.empty_like(src).copy_, src), device, reps=10)
    size = 8192 if cuda else 1024
    a = torch.randn(size, size, device=device, dtype=dtype)
    mm_ms = median_ms(partial(torch.matmul, a, torch.randn_like(a)), device, reps=10)
    return Ceilings(
        bandwidth_gbs=round(2 * n * 4 / copy_ms / 1e6, 1),
        matmul_tflops=round(2 * size**3 / mm_ms / 1e9, 2),
    )


def _weights(model: DiffusionTransformer) -> tuple[int, int, int]:
    """(bytes of every weight a pass reads whole, bytes per embedding row, matmul parameters)."""
    embed = model.embed_tokens.weight
    total, matmul = 0, 0
    for p in model.parameters():  # a tied weight comes once
        if p is embed:
            continue  # the embedding table is gathered by row, not read whole
        total += p.numel() * p.element_size()
        if p.dim() == 2 and p is not model.lm_head.weight:
            matmul += p.numel()
    if model.lm_head.weight is embed:
        total += embed.numel() * embed.element_size()  # tied: lm_head reads the table whole
    return total, embed.shape[1] * embed.element_size(), matmul


@torch.inference_mode()
def time_passes(
    model: DiffusionTransformer,
    canvases: list[int],
    block: int,
    batches: list[int],
    ceilings: Ceilings,
    reps: int = 10,
    graph: bool = False,
) -> list[PassTime]:
    """Full passes at batch 1 and block passes at each batch, for each canvas length."""
    a = model.args
    device = next(model.parameters()).device
    weight_bytes, row_bytes, matmul_params = _weights(model)
    elt = next(model.parameters()).element_size()
    kv_row = 2 * a.num_layers * a.num_kv_heads * a.head_dim * elt  # K and V of one position
    head_flop = 2 * a.vocab_size * a.hidden_size * block  # lm_head scores the block's rows
    out: list[PassTime] = []

    def row(kind: str, b: int, length: int, tokens: int, keys: int, ms: float) -> None:
        gbytes = (weight_bytes + b * (tokens * row_bytes + keys * kv_row)) / 1e9
        attn = 4 * a.num_layers * a.num_heads * a.head_dim * tokens * keys
        gflop = b * (2 * matmul_params * tokens + head_flop + attn) / 1e9
        bw_ms = gbytes / ceilings.bandwidth_gbs * 1e3
        flop_ms = gflop / ceilings.matmul_tflops
        out.append(
            PassTime(kind, b, length, tokens, ms, gbytes, gflop, bw_ms, flop_ms,
                     max(bw_ms, flop_ms) / ms)
        )  # fmt: skip

    for length in [c for c in canvases if c <= a.max_positions]:
        for b in sorted({1, *batches}):
            full, step = _passes(model, b, length, block)
            if b == 1:  # one canvas at a time is how a block starts
                row("full", b, length, length, length, median_ms(full, device, max(3, reps // 2)))
            else:
                full()  # fills the cache the block passes attend to
            if b not in batches:
                continue
            keys = length + 1  # the canvas and the cache's trash slot
            row("block", b, length, block, keys, median_ms(step, device, reps))
            if graph and device.type == "cuda":
                try:
                    replay = _graphed(step)
                except RuntimeError as e:  # a report line, not the end of the bench
                    print(f"block pass as a CUDA graph: capture failed: {e}", file=sys.stderr)
                else:
                    row("block graph", b, length, block, keys, median_ms(replay, device, reps))
    return out


def _passes(
    model: DiffusionTransformer, b: int, length: int, block: int
) -> tuple[Callable[[], object], Callable[[], object]]:
    """A full pass over `b` random canvases of `length`, and a block pass over `block` positions
    mid-canvas (as an infill span sits) against the K/V the full pass left in a shared cache.
    Every input is a fixed tensor, so the block pass can be captured as a CUDA graph."""
    a = model.args
    device = next(model.parameters()).device
    lo = length // 2
    ids = torch.randint(0, a.vocab_size, (b, length), device=device)
    positions = torch.arange(length, device=device).expand(b, -1)
    score = torch.arange(lo, lo + block, device=device).expand(b, -1)
    cache = KVCache(a.num_layers, b, length)
    win = positions[:, lo : lo + block].contiguous()
    win_ids = ids[:, lo : lo + block].contiguous()
    keys = torch.arange(length + 1, device=device) < length  # the trash slot stays hidden
    mask = keys[None, None, None, :].expand(b, 1, 1, -1)
    store = cache.window(win, torch.ones_like(win, dtype=torch.bool))
    local = torch.arange(block, device=device).expand(b, -1)

    def full() -> object:
        return model(ids, positions, store=cache.refresh(), score=score)

    def step() -> object:
        return model(win_ids, win, mask=mask, store=store, score=local)

    return full, step


def _graphed(fn: Callable[[], object]) -> Callable[[], None]:
    """Capture `fn` (static shapes, static input tensors) as a CUDA graph; returns its replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm up allocator and kernels off the capture
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def table(rows: list[PassTime]) -> str:
    head = f"{'pass':>11} {'batch':>5} {'canvas':>6} {'tokens':>6} {'ms':>9} {'GB':>7} "
    head += f"{'GFLOP':>9} {'bw ms':>7} {'flop ms':>7} {'of limit':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.kind:>11} {r.batch:>5} {r.canvas:>6} {r.tokens:>6} {r.ms:>9.3f} {r.gbytes:>7.3f} "
            f"{r.gflop:>9.1f} {r.bw_ms:>7.3f} {r.flop_ms:>7.3f} {r.of_limit:>8.3f}"
        )
    return "\n".join(lines)
