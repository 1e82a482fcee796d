"""Training of the builtin code model (`dllm-infill train`): the objectives and the loop.

The builtin model follows the route Dream and DiffuCoder took from Qwen2.5, AR-to-diffusion
adaptation, in stages chained with `--init`:

1. `--objective ar`: next-token loss under a causal mask. Every token carries loss, which is
   what a tiny CPU budget needs most.
2. `--objective diffusion`: bidirectional attention, LLaDA masked diffusion (loss weighted by 1/t)
   mixed with infill-shaped rows (sampler.py).

Logits are the Dream-shifted ones in both stages (the token at i is scored from hidden state i-1,
`args.logits_shift`), exactly as the engine reads them, so the AR stage trains the very heads the
diffusion stage and the engine use. The recipe is a `TrainConfig` (recipe.py); the output is an
HF-format Dream directory (checkpoint.py) that `infill_engine.load(dir)` reads.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch import Tensor
from tqdm import tqdm

import infill_engine
from infill_engine.models.common import DiffusionTransformer

from .checkpoint import build_model, save_model, warm_start
from .corpus import SourceFile, split_corpus
from .recipe import Schedule, TrainConfig
from .sampler import Batch, Sampler
from .tokenizer_build import train_tokenizer


def shifted_logits(model: DiffusionTransformer, ids: Tensor) -> Tensor:
    """Logits scoring the token *at* each position, as the engine reads them (args.logits_shift)."""
    positions = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
    raw = model(ids, positions)
    if not model.args.logits_shift:
        return raw
    return torch.cat([raw[:, :1], raw[:, :-1]], dim=1)


def ar_loss(model: DiffusionTransformer, ids: Tensor) -> Tensor:
    """Next-token loss under a causal mask: the AR stage of AR-to-diffusion adaptation.

    With the Dream shift, logits[:, i] are read from hidden state i-1, which under a causal mask
    has seen tokens < i: exactly next-token prediction, on the same heads and the same shift the
    diffusion stage and the engine use. Position 0 reads its own state and is not scored.
    """
    if not model.args.logits_shift:
        raise ValueError("the autoregressive stage needs a shifted-logits (Dream) layout")
    t = ids.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool, device=ids.device).tril()
    positions = torch.arange(t, device=ids.device).expand(ids.shape[0], -1)
    raw = model(ids, positions, mask=causal)
    return F.cross_entropy(raw[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


def diffusion_loss(model: DiffusionTransformer, batch: Batch) -> Tensor:
    logits = shifted_logits(model, batch.ids)
    ce = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), reduction="none")
    ce = ce.view_as(batch.targets) * batch.masked
    if batch.scale is not None:
        ce = ce * batch.scale
    return (ce.sum(1) * batch.weight).mean()


def lr_at(step: int, frac_done: float, sched: Schedule) -> float:
    """Linear warm-up, then cosine down to min_lr_ratio over the steps or minutes budget."""
    if step < sched.warmup_steps:
        return sched.lr * (step + 1) / sched.warmup_steps
    floor = sched.min_lr_ratio
    cos = 0.5 * (1 + math.cos(math.pi * min(1.0, frac_done)))
    return sched.lr * (floor + (1 - floor) * cos)


def tokenizer_sample(files: list[SourceFile], seed: int, chars: int = 40_000_000) -> list[str]:
    """A seeded sample of the corpus, at most about `chars` long: BPE merges settle long before
    the whole 100+ MB corpus is read."""
    order = list(range(len(files)))
    random.Random(seed).shuffle(order)
    out: list[str] = []
    total = 0
    for i in order:
        if total >= chars:
            break
        out.append(files[i].text)
        total += len(files[i].text)
    return out


def corpus_files(cfg: TrainConfig) -> list[SourceFile]:
    files, _ = split_corpus(
        heldout_percent=cfg.corpus.heldout_percent,
        max_files=cfg.corpus.max_files,
        sources=cfg.corpus.sources,
        package_mb=cfg.corpus.package_mb,
    )
    return files


def train(
    cfg: TrainConfig,
    out: Path,
    files: list[SourceFile] | None = None,
    progress: bool = True,
    init: Path | None = None,
) -> dict[str, Any]:
    """Train per cfg and write the model dir to `out`; returns a summary (final loss, steps...).

    With `init`, training continues from that model dir (weights, tokenizer, architecture) with
    a fresh schedule; the summary then lists the earlier stages under "stages".
    """
    sched = cfg.train
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(sched.threads)
    if files is None:
        files = corpus_files(cfg)
    stages: list[Any] = []
    tok: Tokenizer
    if init is not None:
        model, tok, stages, cfg = warm_start(init, cfg)
    else:
        tok = train_tokenizer(tokenizer_sample(files, cfg.seed), cfg.vocab_size)
        model = build_model(cfg.model, tok)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": sched.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=sched.lr,
        betas=(0.9, 0.95),
    )
    sampler = Sampler(files, tok, sched, cfg.seed)
    budget, ckpt_every = sched.minutes * 60.0, sched.checkpoint_minutes * 60.0
    start = last_ckpt = first_done = time.monotonic()
    ema: float | None = None
    tokens = step = 0
    # the time left is the run's own (steps_in_budget), not tqdm's: its rate is smoothed over
    # the first steps, which pay for set-up
    bar = tqdm(total=sched.steps, disable=not progress, dynamic_ncols=True, mininterval=2.0,
               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")  # fmt: skip
    model.train()
    while step < sched.steps:
        elapsed = time.monotonic() - start
        if elapsed >= budget:
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(step, max(step / sched.steps, elapsed / budget), sched)
        if sched.objective == "ar":
            ids = sampler.ar_batch(sched.batch_size)
            loss = ar_loss(model, ids)
        else:
            batch = sampler.batch(sched.batch_size)
            ids = batch.ids
            loss = diffusion_loss(model, batch)
        descend(model, opt, loss, sched.grad_clip)
        step += 1
        tokens += ids.numel()
        value = float(loss.item())
        ema = value if ema is None else 0.98 * ema + 0.02 * value
        now = time.monotonic()
        rate = tokens / max(now - start, 1e-9)
        if step == 1:
            first_done = now  # the first step pays for set-up: left out of the pace
        pace = (now - first_done) / (step - 1) if step > 1 else now - start
        bar.total = steps_in_budget(step, sched.steps, now - start, budget, pace)
        left = min((bar.total - step) * pace, max(budget - (now - start), 0.0))
        bar.update(1)
        bar.set_postfix(
            left=tqdm.format_interval(left), loss=f"{ema:.3f}", tok_s=f"{rate:.0f}",
            lr=f"{opt.param_groups[0]['lr']:.1e}",
        )  # fmt: skip
        if time.monotonic() - last_ckpt >= ckpt_every:
            model.eval()
            save_model(model, tok, cfg, out, _meta(cfg, step, ema, n_params, start, tokens, stages))
            model.train()
            last_ckpt = time.monotonic()
    bar.close()
    model.eval()
    meta = _meta(cfg, step, ema, n_params, start, tokens, stages)
    save_model(model, tok, cfg, out, meta)
    return meta


def steps_in_budget(step: int, steps: int, elapsed: float, budget: float, pace: float) -> int:
    """The steps the run will have taken when it ends: `steps`, or fewer where the time budget
    ends it first at `pace` seconds a step. The progress bar counts to this, so that its time
    left is the run's, not that of `steps` at a budget of minutes (once 40 hours for a
    one-minute run)."""
    if pace <= 0:
        return steps
    return max(step, min(steps, step + int(max(budget - elapsed, 0.0) / pace)))


def _meta(
    cfg: TrainConfig,
    step: int,
    ema: float | None,
    n_params: int,
    start: float,
    tokens: int,
    stages: list[Any],
) -> dict[str, Any]:
    this = {
        "steps": step,
        "loss_ema": ema,
        "params": n_params,
        "tokens_seen": tokens,
        "objective": cfg.train.objective,
        "lr": cfg.train.lr,
        "wall_seconds": round(time.monotonic() - start, 1),
    }
    if not stages:
        return {**this, "config": cfg.to_dict()}
    done = [*stages, {**this, "init": True}]
    return {
        **this,
        "steps": sum(int(s["steps"]) for s in done),
        "tokens_seen": sum(int(s["tokens_seen"]) for s in done),
        "wall_seconds": round(sum(float(s["wall_seconds"]) for s in done), 1),
        "stages": done,
        "config": cfg.to_dict(),
    }


def descend(model: DiffusionTransformer, opt: torch.optim.Optimizer, loss: Tensor, clip: float
            ) -> None:  # fmt: skip
    """One optimizer step on the loss, its gradient clipped to `clip`."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()


PACKAGE = Path(infill_engine.__file__).resolve().parent  # the shipped model lives in it


def inside_package(out: Path) -> bool:
    """Whether `out` is in the installed infill_engine package (assets/builtin, the shipped
    model, or any other part of it), links resolved."""
    return out.expanduser().resolve().is_relative_to(PACKAGE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dllm-infill train", description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, default=None, help="default: dllm_lab/train_config.json")
    ap.add_argument("--out", type=Path, required=True, help="the model directory to write")
    ap.add_argument(
        "--overwrite-builtin",
        action="store_true",
        help="allow --out inside the installed package (replaces the shipped model)",
    )
    ap.add_argument("--objective", choices=("ar", "diffusion"), default=None)
    ap.add_argument("--minutes", type=float, default=None, help="wall-clock budget")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate")
    ap.add_argument("--seq-len", type=int, default=None, help="tokens per training row")
    ap.add_argument("--batch-size", type=int, default=None, help="rows per step")
    ap.add_argument("--infill-fraction", type=float, default=None, help="share of infill rows")
    ap.add_argument(
        "--expand-fraction", type=float, default=None, help="share of infill rows taught to expand"
    )
    ap.add_argument(
        "--copy-fraction",
        type=float,
        default=None,
        help="share of infill rows whose middle line stands elsewhere in the row",
    )
    ap.add_argument("--init", type=Path, default=None, help="continue from this model dir")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    a = ap.parse_args(argv)
    if inside_package(a.out) and not a.overwrite_builtin:
        print(
            f"dllm-infill train: --out {a.out} is inside the infill_engine package (the shipped "
            "model); write elsewhere, or add --overwrite-builtin to replace it",
            file=sys.stderr,
        )
        return 2
    try:
        cfg = TrainConfig.load(a.config)
        changes = {
            k: v
            for k, v in (
                ("objective", a.objective),
                ("minutes", a.minutes),
                ("steps", a.steps),
                ("lr", a.lr),
                ("seq_len", a.seq_len),
                ("batch_size", a.batch_size),
                ("infill_fraction", a.infill_fraction),
                ("expand_fraction", a.expand_fraction),
                ("copy_fraction", a.copy_fraction),
            )
            if v is not None
        }
        cfg = cfg.with_train(**changes)
        if a.seed is not None:
            cfg = TrainConfig.from_dict({**cfg.to_dict(), "seed": a.seed})
        meta = train(cfg, a.out, progress=not a.no_progress, init=a.init)
    except (OSError, ValueError) as e:
        print(f"dllm-infill train: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps({k: v for k, v in meta.items() if k != "config"}))
    else:
        print(
            f"wrote {a.out}: {meta['params']:,} params, {meta['steps']} steps, "
            f"loss {meta['loss_ema']:.3f}, {meta['wall_seconds']:.0f}s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
