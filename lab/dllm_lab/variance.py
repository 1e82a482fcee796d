"""How noisy is the diffusion gradient? `python -m dllm_lab.variance --model DIR`.

For a trained model dir, draws the same number of batches with stratified and with iid mask
levels t and reports, for each, the mean squared distance of the batch gradients from their mean
(the variance of the gradient estimator, summed over parameters) and the spread of the batch
losses. Both samplers run on the same model and corpus in one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from infill_engine.loader import load_model_dir

from .recipe import TrainConfig
from .sampler import Sampler
from .train import corpus_files, diffusion_loss


def gradient_spread(model: torch.nn.Module, sampler: Sampler, batches: int, size: int) -> dict:
    grads, losses = [], []
    for _ in tqdm(range(batches), desc="batches", leave=False):
        model.zero_grad(set_to_none=True)
        loss = diffusion_loss(model, sampler.batch(size))  # type: ignore[arg-type]
        loss.backward()
        grads.append(
            torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        )
        losses.append(float(loss))
    g = torch.stack(grads)
    var = float(((g - g.mean(0)) ** 2).sum(1).mean())
    lt = torch.tensor(losses)
    return {"grad_variance": var, "grad_mean_sq_norm": float((g.mean(0) ** 2).sum()),
            "loss_mean": float(lt.mean()), "loss_std": float(lt.std())}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="a dir this trainer wrote")
    ap.add_argument("--batches", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    meta = json.loads((a.model / "training_meta.json").read_text())
    cfg = TrainConfig.from_dict(meta["config"]).with_train(objective="diffusion")
    loaded = load_model_dir(a.model, torch.device("cpu"), torch.float32, with_tokenizer=False)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(a.model / "tokenizer.json"))
    files = corpus_files(cfg)
    out = {}
    for stratified in (True, False):
        sched = dataclasses.replace(cfg.train, stratified_t=stratified)
        sampler = Sampler(files, tok, sched, a.seed)
        torch.manual_seed(a.seed)
        key = "stratified" if stratified else "iid"
        out[key] = gradient_spread(loaded.model.train(), sampler, a.batches, sched.batch_size)
    out["variance_ratio_iid_over_stratified"] = (
        out["iid"]["grad_variance"] / out["stratified"]["grad_variance"]
    )
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
