"""`dllm-infill bench`: NFE and wall time of the decode/cache combinations, side by side.

For each span length, every configuration fills the same hole of the same sample file in one
process, and each figure is reported as a ratio to the baseline (fixed schedule, one token per
step, no cache: LLaDA's original) measured in the same run, with the share of output tokens that
agree with the baseline. The threshold rows use the τ the model directory recommends (else
0.9); `--thresholds 0.5,0.7,0.9,1.0` gives the speed/quality curve: the threshold policy with
each cache at each τ. τ = 1.0 commits one token per step (the most
confident), so its rows isolate what the caches alone cost in agreement. A benchmark, not a
test: it measures and prints.

`--random-init` swaps in a random model of the builtin's shape with room for long spans; it shows
the cache speedups (cost per pass) but not the confidence-driven NFE savings, which need a
trained model.

The `dual+x` rows run the dual cache with `speculate="exact"` (speculate.py: guessed next
states checked in the same window pass); their `vs eager` column is their agreement with the
plain dual row, which must be 1.000 (the same tokens in fewer passes).

Before anything is timed, every configuration fills the hole once at one block's span
(`warm_up`), so that no row, the baseline first of all, pays for first-call costs (kernel and
allocator set-up, thread pools, CUDA graph capture).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from tqdm import tqdm

import infill_engine
from infill_engine import cli_args, load
from infill_engine.engine import Engine
from infill_engine.fits import parameters
from infill_engine.models import DiffusionTransformer, ModelArgs
from infill_engine.models.shapes import SHAPES, parameter_count, shape_args
from infill_engine.params import CacheMode, DecodePolicy, InfillParams
from infill_engine.quantize import QUANTIZE_MODES, quantize_model, weight_bytes
from infill_engine.request import InfillRequest

from . import pass_timing

BASELINE = ("fixed", "none")
CACHES = ("none", "prefix", "dual", "dual+x")  # +x: the exact mode of speculate.py
# A fixed sample, so that figures taken on different days fill the same hole (it once was
# runner.py, whose hole moved with every edit of the runner); a wheel without the repo's
# examples/ falls back to a source that ships with infill_engine.
SAMPLE = Path(__file__).parents[2] / "examples" / "bench_sample.py"
if not SAMPLE.is_file():
    SAMPLE = Path(infill_engine.__file__).parent / "runner.py"


@dataclass(frozen=True)
class Measure:
    span: int
    decode: str
    cache: str
    threshold: float | None  # τ of the threshold rows; None for the baseline
    nfe: int
    nfe_full: int
    nfe_block: int
    wall_ms: float
    nfe_ratio: float  # baseline NFE / this NFE
    speedup: float  # baseline wall / this wall
    agree: float  # share of span positions equal to the baseline's
    tokens_per_pass: float
    vs_eager: float | None = None  # a graphed row: agreement with the same row run eagerly


def random_engine(
    base: Engine, args: ModelArgs, seed: int, mask_id: int | None = None, family: str = ""
) -> Engine:
    """A random network of shape `args` on the base engine's device and dtype, with its
    tokenizer. Built on the meta device first: a 7B shape is never materialised on the CPU."""
    torch.manual_seed(seed)
    with torch.device("meta"):
        model = DiffusionTransformer(args)
    model = model.to(dtype=base.dtype).to_empty(device=base.device)
    with torch.no_grad():
        for p in model.parameters():
            torch.nn.init.normal_(p, std=0.02) if p.dim() > 1 else torch.nn.init.ones_(p)
    return Engine(
        model.eval(),
        base.tokenizer,
        base.mask_id if mask_id is None else mask_id,
        base.end_ids,
        family or base.family,
        None,
    )


def shaped_engine(base: Engine, shape: str, layers: int | None, seed: int) -> tuple[Engine, str]:
    """A random network in a released checkpoint's shape (`--shape`), and its name for reports.
    Raises ValueError for an unknown shape or a bad layer count."""
    family, args, mask_id = shape_args(shape, layers)
    engine = random_engine(base, args, seed, mask_id, family.name)
    return engine, f"{shape} ({args.num_layers} layers, {parameter_count(args) / 1e9:.2f} B params)"


CPU_BUILD_GB = 4.0  # a random network past this is not built on the CPU unless asked for


def too_big_here(shape: str, layers: int | None, device: str) -> str:
    """Why a `--shape` network should not be built where `--device auto` puts it (the CPU, on
    a machine without CUDA), or "": it would take minutes and more memory than CPU_BUILD_GB."""
    if device != "auto" or torch.cuda.is_available():
        return ""
    try:
        _, args, _ = shape_args(shape, layers)
    except ValueError:
        return ""  # the load says what is wrong with the shape
    params = parameter_count(args)
    need = params * 4 / 1e9  # float32 on the CPU
    if need <= CPU_BUILD_GB:
        return ""
    return (
        f"{shape} ({args.num_layers} layers, {parameters(params)} parameters) needs about "
        f"{need:.0f} GB at float32, and this machine has no CUDA device: pass --device cuda on a "
        "GPU machine, --layers N for fewer layers, or --device cpu to build it anyway"
    )


def agreement(a: list[int], b: list[int]) -> float:
    n = max(len(a), len(b))
    return 1.0 if n == 0 else sum(x == y for x, y in zip(a, b, strict=False)) / n


def hole(
    engine: Engine, prefix_tokens: int, suffix_tokens: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ids = engine.encode(SAMPLE.read_text())
    cut = len(ids) // 2
    return tuple(ids[cut - prefix_tokens : cut]), tuple(ids[cut : cut + suffix_tokens])


def configs(thresholds: list[float], graphs: bool = False) -> list[tuple[str, str, float | None]]:
    """The baseline first, then the threshold policy with every cache at every τ. Where window
    passes are replayed as CUDA graphs (`graphs`), the cached rows say so ("prefix/g",
    "dual/g"), and an eager dual row runs first, to compare with."""
    caches = ("none", "prefix/g", "dual", "dual/g", "dual+x/g") if graphs else CACHES
    return [(*BASELINE, None)] + [("threshold", c, t) for t in thresholds for c in caches]


def cache_of(label: str) -> str:
    """A row label's cache mode ("dual+x/g" -> "dual")."""
    return label.removesuffix("/g").removesuffix("+x")


def fill_once(
    engine: Engine,
    prefix: tuple[int, ...],
    suffix: tuple[int, ...],
    span: int,
    block_size: int,
    config: tuple[str, str, float | None],
) -> Any:
    """One fill of the hole in one configuration (decode, cache label, τ): the row's result."""
    dec, label, tau = config
    params = InfillParams(
        span=span,
        max_span=max(span, 512),
        block_size=block_size,
        decode=cast(DecodePolicy, dec),
        cache=cast(CacheMode, cache_of(label)),
        threshold=engine.threshold if tau is None else tau,
        speculate="exact" if "+x" in label else "off",
    )
    graphs = engine.runner.graphs
    engine.runner.graphs = graphs if label.endswith("/g") else None
    try:
        return engine.run([InfillRequest(prefix, suffix, span, params)])[0]
    finally:
        engine.runner.graphs = graphs


def warm_up(
    engine: Engine,
    prefix: tuple[int, ...],
    suffix: tuple[int, ...],
    block_size: int,
    rows: list[tuple[str, str, float | None]],
) -> tuple[int, dict[tuple[str, str, float | None], float]]:
    """Every configuration once at one block's span, not reported: the first call of each code
    path (full pass, window passes per cache, graph capture) pays its set-up here, not in a row.
    The span, and each configuration's seconds (what the time left is first estimated from)."""
    span = min(block_size, engine.args.max_positions - len(prefix) - len(suffix))
    seconds: dict[tuple[str, str, float | None], float] = {}
    if span < 1:
        return span, seconds
    for config in tqdm(list(dict.fromkeys(rows)), desc="bench warm-up", unit="config"):
        t0 = time.perf_counter()
        fill_once(engine, prefix, suffix, span, block_size, config)
        seconds[config] = time.perf_counter() - t0
    return span, seconds


BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} runs [{elapsed}{postfix}]"


class TimeLeft:
    """The time a bench has left. Each run is first estimated from its configuration's warm-up
    fill (`estimate`: scaled by the span, and by the canvas where no cache keeps it from
    mattering). Once a configuration has run, its later runs are estimated from that run
    instead (the same scaling); the others' estimates are scaled by what the runs done took
    against theirs. A run of many minutes (a span of 1024 at one token per pass) counts down
    while it runs."""

    def __init__(self, estimates: list[float], keys: list[object] | None = None) -> None:
        self.estimates = list(estimates)
        self.keys = keys if keys is not None else list(range(len(estimates)))  # configurations
        self.measured: set[int] = set()  # runs whose estimate a run of theirs replaced
        self.done = 0  # runs finished
        self.took = 0.0  # their seconds
        self.guessed = 0.0  # their estimates when they started
        self.started = time.monotonic()  # the current run's start

    def start(self) -> None:
        self.started = time.monotonic()

    def finish(self) -> None:
        i, took = self.done, time.monotonic() - self.started
        self.took += took
        self.guessed += self.estimates[i]
        ratio = took / self.estimates[i] if self.estimates[i] > 0 else 1.0
        for j in range(i + 1, len(self.estimates)):
            if self.keys[j] == self.keys[i]:
                self.estimates[j] *= ratio
                self.measured.add(j)
        self.done += 1

    def _scaled(self, j: int, scale: float) -> float:
        return self.estimates[j] * (1.0 if j in self.measured else scale)

    def seconds(self) -> float:
        scale = self.took / self.guessed if self.guessed > 0 and self.took > 0 else 1.0
        rest = sum(self._scaled(j, scale) for j in range(self.done + 1, len(self.estimates)))
        if self.done >= len(self.estimates):
            return rest
        current = self._scaled(self.done, scale)
        return rest + max(current - (time.monotonic() - self.started), 0.0)


def estimate(
    warm: dict[tuple[str, str, float | None], float], warm_span: int, context: int,
    span: int, config: tuple[str, str, float | None],
) -> float:  # fmt: skip
    """A run's seconds, guessed from its configuration's warm-up at `warm_span`."""
    seconds = warm.get(config, 0.0) * span / max(warm_span, 1)
    if cache_of(config[1]) == "none":  # every pass reads the whole canvas
        seconds *= (context + span) / (context + max(warm_span, 1))
    return seconds


def counting_down(bar: Any, left: TimeLeft) -> threading.Event:
    """Say the time left on `bar` every second, on a thread of its own, until the event is set."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(1.0):
            bar.set_postfix_str(f"about {tqdm.format_interval(left.seconds())} left")

    threading.Thread(target=tick, daemon=True).start()
    return stop


def run(
    engine: Engine, spans: list[int], block_size: int, thresholds: list[float], context: int
) -> list[Measure]:
    prefix, suffix = hole(engine, context * 3 // 4, context // 4)
    out: list[Measure] = []
    rows = configs(thresholds, engine.runner.graphs is not None)
    room = engine.args.max_positions - len(prefix) - len(suffix)
    for span in sorted({s for s in spans if s > room}):
        print(f"span {span}: skipped, the model has {engine.args.max_positions} positions",
              file=sys.stderr)  # fmt: skip
    runs = [(s, *config) for s in spans if s <= room for config in rows]
    warm_span, warm = warm_up(engine, prefix, suffix, block_size, rows)
    canvas = len(prefix) + len(suffix)
    left = TimeLeft([estimate(warm, warm_span, canvas, s, (d, c, t)) for s, d, c, t in runs],
                    [(d, c, t) for _, d, c, t in runs])  # fmt: skip
    base_ids: list[int] = []
    base_nfe, base_ms = 1, 1.0
    eager_ids: list[int] = []
    # tqdm's own estimate assumes runs alike; the baseline at a long span takes most of the time
    bar = tqdm(runs, desc="bench", unit="run", bar_format=BAR)
    bar.set_postfix_str(f"about {tqdm.format_interval(left.seconds())} left")
    stop = counting_down(bar, left)
    try:
        for span, dec, label, tau in bar:
            cache = cache_of(label)
            left.start()
            t0 = time.perf_counter()
            r = fill_once(engine, prefix, suffix, span, block_size, (dec, label, tau))
            ms = (time.perf_counter() - t0) * 1000
            left.finish()
            bar.set_postfix_str(f"about {tqdm.format_interval(left.seconds())} left")
            ids = r.token_ids
            twin = label != "dual" and cache == "dual"  # graphed or speculating: the dual twin
            if (dec, cache) == BASELINE:
                base_ids, base_nfe, base_ms = ids, r.nfe, ms
            if label == "dual":
                eager_ids = ids
            out.append(
                Measure(
                    span, dec, label, tau, r.nfe, r.nfe_full, r.nfe_block, round(ms, 1),
                    round(base_nfe / r.nfe, 2), round(base_ms / ms, 2),
                    round(agreement(ids, base_ids), 3), round(r.tokens / max(r.nfe, 1), 2),
                    round(agreement(ids, eager_ids), 3) if twin else None,
                )
            )  # fmt: skip
    finally:
        stop.set()
        bar.close()
    return out


def table(rows: list[Measure]) -> str:
    head = f"{'span':>5} {'decode':>9} {'τ':>4} {'cache':>8} {'NFE':>6} {'full':>5} {'block':>6} "
    head += f"{'wall ms':>9} {'NFE x':>6} {'speed x':>8} {'agree':>6} {'tok/pass':>8}"
    head += f" {'vs eager':>8}"
    lines = [head, "-" * len(head)]
    for m in rows:
        lines.append(
            f"{m.span:>5} {m.decode:>9} {'-' if m.threshold is None else m.threshold:>4} "
            f"{m.cache:>8} {m.nfe:>6} {m.nfe_full:>5} {m.nfe_block:>6} "
            f"{m.wall_ms:>9.1f} {m.nfe_ratio:>6.2f} {m.speedup:>8.2f} {m.agree:>6.3f} "
            f"{m.tokens_per_pass:>8.2f} {'-' if m.vs_eager is None else f'{m.vs_eager:.3f}':>8}"
        )
    return "\n".join(lines)


AGREE_NOTE = (
    "agree: the share of span positions whose token equals the baseline's (fixed schedule, one "
    "token per step, no cache) in this run; 1.000 = the same fill. NFE x and speed x: the "
    "baseline's passes and wall time over the row's."
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dllm-infill bench", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--spans", type=cli_args.listed(cli_args.count), default="64,256",
                    help="comma-separated span lengths ('' = none)")  # fmt: skip
    ap.add_argument("--block-size", type=cli_args.count, default=32)
    ap.add_argument(
        "--thresholds",
        type=cli_args.listed(cli_args.threshold),
        default="",
        help="comma-separated τ values in (0, 1], e.g. 0.5,0.7,0.9,1.0 (default: the model's "
        "recommended τ)",
    )
    ap.add_argument("--context", type=int, default=96, help="prefix+suffix tokens")
    ap.add_argument("--random-init", action="store_true", help="random weights, 4096 positions")
    ap.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        help="with --random-init: a released checkpoint's shape; adds the pass-time table",
    )
    ap.add_argument("--layers", type=int, help="with --shape: keep only this many layers")
    ap.add_argument(
        "--canvases", default="1024,4096", help="with --shape: canvas lengths for pass times"
    )
    ap.add_argument("--batches", default="1,8", help="with --shape: batch sizes of block passes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quantize", choices=QUANTIZE_MODES, default="none", help="weight-only")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if (a.shape or a.layers) and not a.random_init:
        ap.error("--shape and --layers build a random model: add --random-init")
    if a.layers is not None and not a.shape:
        ap.error("--layers needs --shape")
    spans, thresholds = a.spans, a.thresholds
    if a.shape and (big := too_big_here(a.shape, a.layers, a.device)):
        print(f"dllm-infill bench: {big}", file=sys.stderr)
        return 2
    name = a.model
    try:
        engine = load(a.model, device=a.device, quantize="none" if a.random_init else a.quantize)
        if a.shape:
            engine, name = shaped_engine(engine, a.shape, a.layers, a.seed)
            quantize_model(engine.model, a.quantize)
    except (OSError, ValueError) as e:  # a missing or corrupt model, no such device, a bad shape
        print(f"dllm-infill bench: {e}", file=sys.stderr)
        return 2
    passes: list[pass_timing.PassTime] = []
    ceilings = None
    if a.shape:
        ceilings = pass_timing.measure_ceilings(engine.device, engine.dtype)
        passes = pass_timing.time_passes(
            engine.model,
            [int(c) for c in a.canvases.split(",") if c.strip()],
            a.block_size,
            [int(b) for b in a.batches.split(",") if b.strip()],
            ceilings,
            graph=engine.device.type == "cuda",
        )
    elif a.random_init:
        args = dataclasses.replace(engine.args, max_positions=4096)
        engine = random_engine(engine, args, a.seed)
        quantize_model(engine.model, a.quantize)  # the mode was checked by the load above
    # the τ the model directory recommends (a random network recommends none: 0.9)
    thresholds = thresholds or [engine.threshold]
    if a.json:
        rows = run(engine, spans, a.block_size, thresholds, a.context) if spans else []
        report: dict[str, object] = {"decode": [m.__dict__ for m in rows]}
        if ceilings is not None:
            report["model"], report["ceilings"] = name, ceilings.__dict__
            report["passes"] = [p.__dict__ for p in passes]
        print(json.dumps(report if ceilings is not None else report["decode"], indent=2))
        return 0
    random = " (random init)" if a.random_init else ""
    print(f"model: {name}{random}, device: {engine.device}, dtype: {engine.dtype}, "
          f"quantize: {a.quantize}, weights {weight_bytes(engine.model) / 2**20:.1f} MiB",
          flush=True)  # fmt: skip
    if ceilings is not None:
        print(
            f"measured here: copy {ceilings.bandwidth_gbs:.0f} GB/s, "
            f"matmul {ceilings.matmul_tflops:.1f} TFLOP/s"
        )
        print(pass_timing.table(passes), flush=True)  # before the decode table, which takes long
    if spans:
        print(table(run(engine, spans, a.block_size, thresholds, a.context)))
        print(AGREE_NOTE)
    return 0
