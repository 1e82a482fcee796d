"""One prepared training run of the builtin model on one accelerator, in one command:
`python -m dllm_lab.gpu_run --out DIR --device cuda --minutes 8`.

Owns the run, not the recipe: it builds the corpus from the Python installation of the machine it
runs on (corpus.py's rules: stdlib and every site-packages directory, no tests, no vendored
trees, no generated-looking files, nothing mentioning HumanEval, dedup by content, the held-out
split keyed on the version-free path), tokenizes it over all cores with the builtin tokenizer,
then trains the two stages of train.py within one wall-clock budget: AR (`--ar-share` of it),
then masked diffusion with infill, DreamOn expand and repository rows (sampler.py). On CUDA it
runs in bf16 autocast with fused attention (SDPA); on the CPU in fp32, at toy scale for tests.

DIR always holds a loadable model: it is rewritten (sharded, every file under 16 MiB) every
`--checkpoint-minutes` and at the end of each stage; DIR/ar is the AR stage's final model (the
`eval-infill --ar-baseline`). training_meta.json records the corpus manifest, the loss curve,
each stage and each checkpoint.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import multiprocessing as mp
import os
import platform
import shutil
import sys
import time
from array import array
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

import infill_engine
from infill_engine.models.common import DiffusionTransformer

from .checkpoint import build_model, save_model
from .corpus import SourceFile, site_packages_roots, split_corpus
from .recipe import CorpusSpec, Schedule, TrainConfig
from .sampler import Batch, Sampler
from .train import ar_loss, descend, diffusion_loss, lr_at

BUILTIN = Path(infill_engine.__file__).resolve().parent / "assets" / "builtin"
SHARD_BYTES = 15 * 2**20  # each weight file under 16 MiB
SAVE_RESERVE_S = 15.0  # kept back from the budget for each stage's last checkpoint (at most)


def build_corpus(spec: CorpusSpec) -> tuple[list[SourceFile], list[SourceFile]]:
    """(train, held-out) from this interpreter's stdlib and all its site-packages directories.
    `max_files` keeps a subset ordered by the SHA-1 of the path, so a small corpus still draws
    from every source."""
    train, held = split_corpus(
        heldout_percent=spec.heldout_percent,
        sources=("stdlib", "site-packages"),
        package_mb=spec.package_mb,
        site_roots=site_packages_roots(),
    )
    if spec.max_files is not None:
        keep = sorted(train, key=lambda f: hashlib.sha1(f.rel.encode()).hexdigest())
        chosen = {f.rel for f in keep[: spec.max_files]}
        train = [f for f in train if f.rel in chosen]
    return train, held


def package_of(rel: str) -> str:
    """The manifest's name for a corpus file's package: "stdlib" or the top-level import name."""
    if not rel.startswith("site-packages/"):
        return "stdlib"
    top = rel.split("/")[1]
    return top[:-3] if top.endswith(".py") else top


_WORKER_TOK: list[Tokenizer] = []  # one tokenizer per tokenising process, set by its initializer


def _init_tokenizer(path: str) -> None:
    _WORKER_TOK[:] = [Tokenizer.from_file(path)]


def _encode_texts(texts: list[str]) -> list[bytes]:
    tok = _WORKER_TOK[0]
    return [array("h", tok.encode(t).ids).tobytes() for t in texts]


def tokenize_parallel(
    files: list[SourceFile], tokenizer: Path, workers: int
) -> tuple[list[Tensor], dict[str, Any]]:
    """Each file's ids (int16 tensors, shared with the row workers by fork) over `workers`
    processes, and the corpus manifest: files, bytes, tokens, and per package its files, bytes,
    tokens and installed distribution versions."""
    if Tokenizer.from_file(str(tokenizer)).get_vocab_size() > 2**15:
        raise ValueError("ids are stored as int16: the vocabulary must be under 32,768")
    texts = [f.text for f in files]
    chunks = [texts[i : i + 64] for i in range(0, len(texts), 64)]
    if workers > 1:
        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        with ctx.Pool(workers, _init_tokenizer, (str(tokenizer),)) as pool:
            encoded = [b for part in pool.imap(_encode_texts, chunks) for b in part]
    else:
        _init_tokenizer(str(tokenizer))
        encoded = [b for c in chunks for b in _encode_texts(c)]
    token_ids = [torch.frombuffer(bytearray(b), dtype=torch.int16) for b in encoded]
    dists = md.packages_distributions()
    packages: dict[str, dict[str, Any]] = {}
    for f, ids in zip(files, token_ids, strict=True):
        name = package_of(f.rel)
        entry = packages.setdefault(name, {"files": 0, "bytes": 0, "tokens": 0})
        entry["files"] += 1
        entry["bytes"] += len(f.text.encode("utf-8"))
        entry["tokens"] += len(ids)
    for name, entry in packages.items():
        if name == "stdlib":
            entry["versions"] = {"python": platform.python_version()}
            continue
        entry["versions"] = {d: _version(d) for d in sorted(set(dists.get(name, [])))}
    manifest = {
        "python": platform.python_version(),
        "files": len(files),
        "bytes": sum(p["bytes"] for p in packages.values()),
        "tokens": sum(p["tokens"] for p in packages.values()),
        "packages": dict(sorted(packages.items())),
    }
    return token_ids, manifest


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


class _Rows(IterableDataset[Any]):
    """Endless batches of one stage's rows; each loader worker draws with a seed of its own."""

    def __init__(
        self, files: list[SourceFile], ids: list[Tensor], tok: Tokenizer, sched: Schedule, seed: int
    ) -> None:
        self.files, self.ids, self.tok, self.sched, self.seed = files, ids, tok, sched, seed

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        seed = self.seed * 1000 + (info.id if info is not None else 0)
        sampler = Sampler(self.files, self.tok, self.sched, seed, token_ids=self.ids)
        size = self.sched.batch_size
        while True:
            if self.sched.objective == "ar":
                yield sampler.ar_batch(size)
            else:
                b = sampler.batch(size)
                yield b.ids, b.targets, b.masked, b.weight, b.scale


def row_batches(
    files: list[SourceFile],
    ids: list[Tensor],
    tok: Tokenizer,
    sched: Schedule,
    seed: int,
    workers: int,
) -> Generator[Batch | Tensor, None, None]:
    """The stage's batches, built by `workers` processes ahead of the device (in-process at 0)."""
    rows = _Rows(files, ids, tok, sched, seed)
    loader = DataLoader(
        rows,
        batch_size=None,
        num_workers=workers,
        pin_memory=torch.cuda.is_available(),
        prefetch_factor=4 if workers else None,
        persistent_workers=False,
    )
    for item in loader:
        if isinstance(item, Tensor):
            yield item
        else:
            inputs, targets, masked, weight, scale = item
            yield Batch(inputs, targets, masked, weight, scale)


@dataclass
class Run:
    """What a run carries between its stages: the output, the clock and the record so far."""

    out: Path
    device: torch.device
    tok: Tokenizer
    manifest: dict[str, Any]
    shard_bytes: int
    ckpt_every_s: float
    log_every: int
    stages: list[dict[str, Any]] = field(default_factory=list)
    curve: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    start: float = field(default_factory=time.monotonic)

    def save(self, model: DiffusionTransformer, cfg: TrainConfig, reason: str, to: Path) -> None:
        record: dict[str, Any] = {"reason": reason, "dir": str(to.relative_to(self.out.parent))}
        record["wall_s"] = round(time.monotonic() - self.start, 1)
        self.checkpoints.append(record)
        meta = {
            "stages": self.stages,
            "corpus_manifest": self.manifest,
            "curve": self.curve,
            "checkpoints": self.checkpoints,
            "config": cfg.to_dict(),
        }
        save_model(model, self.tok, cfg, to, meta, shard_bytes=self.shard_bytes)
        gen = BUILTIN / "generation_config.json"
        if gen.is_file():
            shutil.copyfile(gen, to / "generation_config.json")


def train_stage(
    run: Run,
    model: DiffusionTransformer,
    cfg: TrainConfig,
    files: list[SourceFile],
    token_ids: list[Tensor],
    seconds: float,
    workers: int,
) -> None:
    """One stage (cfg.train.objective) for `seconds` of wall clock, checkpointing into run.out."""
    sched, dev = cfg.train, run.device
    cuda = dev.type == "cuda"
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": sched.weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=sched.lr, betas=(0.9, 0.95), fused=cuda)
    batches = row_batches(files, token_ids, run.tok, sched, cfg.seed + len(run.stages), workers)
    start = last_ckpt = last_log = time.monotonic()
    step = tokens = logged_tokens = 0
    loss_sum = torch.zeros((), device=dev)  # summed on the device: one sync per log line
    model.train()
    while step < sched.steps and time.monotonic() - start < seconds:
        frac = max(step / sched.steps, (time.monotonic() - start) / seconds)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, frac, sched)
        rows = next(batches)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            if isinstance(rows, Batch):
                batch = _to(rows, dev)
                ids, loss = batch.ids, diffusion_loss(model, batch)
            else:
                ids = rows.to(dev, non_blocking=True)
                loss = ar_loss(model, ids)
        descend(model, opt, loss, sched.grad_clip)
        step += 1
        tokens += ids.numel()
        loss_sum += loss.detach().float()
        if step % run.log_every == 0:
            now = time.monotonic()
            point = {
                "stage": sched.objective,
                "step": step,
                "loss": round(float(loss_sum) / run.log_every, 4),
                "tok_s": round((tokens - logged_tokens) / max(now - last_log, 1e-9)),
                "lr": opt.param_groups[0]["lr"],
                "wall_s": round(now - run.start, 1),
            }
            run.curve.append(point)
            print(
                f"[{point['stage']}] step {step}  loss {point['loss']:.3f}  "
                f"lr {point['lr']:.1e}  {point['tok_s']:,} tok/s  {now - start:.0f}/{seconds:.0f}s",
                flush=True,
            )
            loss_sum.zero_()
            last_log, logged_tokens = now, tokens
        if time.monotonic() - last_ckpt >= run.ckpt_every_s:
            run.stages.append(_record(cfg, step, tokens, start, run, partial=True))
            run.save(model, cfg, f"{sched.objective} step {step}", run.out)
            run.stages.pop()
            last_ckpt = time.monotonic()
    batches.close()  # stops the row workers
    model.eval()
    run.stages.append(_record(cfg, step, tokens, start, run, partial=False))
    run.save(model, cfg, f"end of {sched.objective}", run.out)


def _to(b: Batch, dev: torch.device) -> Batch:
    scale = None if b.scale is None else b.scale.to(dev, non_blocking=True)
    ids, targets, masked, weight = (
        t.to(dev, non_blocking=True) for t in (b.ids, b.targets, b.masked, b.weight)
    )
    return Batch(ids, targets, masked, weight, scale)


def _record(
    cfg: TrainConfig, step: int, tokens: int, start: float, run: Run, partial: bool
) -> dict[str, Any]:
    losses = [p["loss"] for p in run.curve if p["stage"] == cfg.train.objective]
    tail = losses[-5:]
    wall = time.monotonic() - start
    return {
        "objective": cfg.train.objective,
        "steps": step,
        "tokens_seen": tokens,
        "tokens_per_s": round(tokens / max(wall, 1e-9)),
        "loss_ema": sum(tail) / len(tail) if tail else None,  # mean of the last 5 log points
        "wall_seconds": round(wall, 1),
        "rows": [cfg.train.batch_size, cfg.train.seq_len],
        "lr": cfg.train.lr,
        "partial": partial,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m dllm_lab.gpu_run", description=__doc__)
    ap.add_argument("--out", type=Path, required=True, help="model dir to write (DIR/ar too)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--minutes", type=float, default=8.0, help="whole command, corpus included")
    ap.add_argument("--ar-share", type=float, default=0.35, help="share of training time for AR")
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--mlp", type=int, default=1024, help="intermediate size")
    ap.add_argument("--seq-len", type=int, default=None, help="default 1024 on cuda, 256 on cpu")
    ap.add_argument("--batch-size", type=int, default=None, help="default 64 on cuda, 8 on cpu")
    ap.add_argument("--lr-ar", type=float, default=2e-3)
    ap.add_argument("--lr-diffusion", type=float, default=1e-3)
    ap.add_argument("--infill-fraction", type=float, default=0.75)
    ap.add_argument("--expand-fraction", type=float, default=0.1)
    ap.add_argument("--repo-fraction", type=float, default=0.25)
    ap.add_argument("--package-mb", type=float, default=24.0, help="cap per top-level package")
    ap.add_argument("--max-files", type=int, default=None, help="test-scale corpus cap")
    ap.add_argument("--workers", type=int, default=None, help="row/tokenizer processes")
    ap.add_argument("--checkpoint-minutes", type=float, default=2.0)
    ap.add_argument("--log-every", type=int, default=None, help="steps per progress line")
    ap.add_argument("--tokenizer", type=Path, default=BUILTIN / "tokenizer.json")
    ap.add_argument("--seed", type=int, default=1234)
    return ap.parse_args(argv)


def config_for(a: argparse.Namespace, cuda: bool) -> TrainConfig:
    seq = a.seq_len or (1024 if cuda else 256)
    d = TrainConfig.load().to_dict()
    d["seed"] = a.seed
    d["corpus"].update(package_mb=a.package_mb, max_files=a.max_files)
    d["model"].update(
        hidden_size=a.hidden,
        intermediate_size=a.mlp,
        num_hidden_layers=a.layers,
        num_attention_heads=a.heads,
        num_key_value_heads=a.kv_heads,
        max_position_embeddings=seq,
    )
    d["train"].update(
        seq_len=seq,
        batch_size=a.batch_size or (64 if cuda else 8),
        infill_fraction=a.infill_fraction,
        expand_fraction=a.expand_fraction,
        repo_fraction=a.repo_fraction,
        max_span=min(d["train"]["max_span"] * 2, seq // 2) if cuda else d["train"]["max_span"],
        minutes=max(a.minutes, 0.01),
        threads=torch.get_num_threads(),
    )
    return TrainConfig.from_dict(d)


def main(argv: list[str] | None = None) -> int:
    t0 = time.monotonic()
    a = parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        print("gpu_run: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    if not 0.0 < a.ar_share < 1.0:
        print("gpu_run: --ar-share must be in (0, 1)", file=sys.stderr)
        return 2
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the workers are the parallelism
    dev, cuda = torch.device(a.device), a.device == "cuda"
    workers = a.workers if a.workers is not None else (max(1, (os.cpu_count() or 2) - 2))
    try:
        cfg = config_for(a, cuda)
    except ValueError as e:
        print(f"gpu_run: {e}", file=sys.stderr)
        return 2
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(cfg.seed)
    tok = Tokenizer.from_file(str(a.tokenizer))
    files, held = build_corpus(cfg.corpus)
    token_ids, manifest = tokenize_parallel(files, a.tokenizer, workers)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "corpus.txt").write_text("".join(f.rel + "\n" for f in files))
    manifest["held_out_files"] = len(held)
    manifest["corpus_seconds"] = round(time.monotonic() - t0, 1)
    print(
        f"corpus: {manifest['files']:,} files, {manifest['bytes'] / 1e6:.1f} MB, "
        f"{manifest['tokens'] / 1e6:.2f} M tokens, {len(manifest['packages'])} packages, "
        f"{len(held)} held out ({manifest['corpus_seconds']:.0f}s)",
        flush=True,
    )
    model = build_model(cfg.model, tok).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    reserve = min(SAVE_RESERVE_S, a.minutes * 3)  # 5 % of a short budget
    left = a.minutes * 60 - (time.monotonic() - t0) - 2 * reserve
    if left < 10:
        print(f"gpu_run: the corpus took the budget; {left:.0f}s left to train", file=sys.stderr)
    ar_s, diff_s = max(left * a.ar_share, 1.0), max(left * (1 - a.ar_share), 1.0)
    print(
        f"model: {n_params / 1e6:.2f} M params ({a.hidden}x{a.layers}, {a.heads}/{a.kv_heads} "
        f"heads, mlp {a.mlp}), rows {cfg.train.batch_size}x{cfg.train.seq_len} on {dev}; "
        f"AR {ar_s:.0f}s then diffusion {diff_s:.0f}s",
        flush=True,
    )
    log_every = a.log_every or (50 if cuda else 5)
    ckpt_s = a.checkpoint_minutes * 60
    run = Run(a.out, dev, tok, manifest, SHARD_BYTES, ckpt_s, log_every, start=t0)
    ar_cfg = cfg.with_train(objective="ar", lr=a.lr_ar)
    train_stage(run, model, ar_cfg, files, token_ids, ar_s, workers)
    run.save(model, ar_cfg, "AR stage for --ar-baseline", a.out / "ar")
    diff_cfg = cfg.with_train(objective="diffusion", lr=a.lr_diffusion)
    train_stage(run, model, diff_cfg, files, token_ids, diff_s, workers)
    total = time.monotonic() - t0
    print(f"wrote {a.out}: {n_params:,} params, {total:.0f}s in all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
