"""Commit policies: which masked positions of a block to fix at this step. Pure functions of logits.

`propose` turns logits into a candidate token and its confidence per position (greedy or sampled);
`select` decides which masked positions to commit:
- "fixed"     k = ceil(masked / steps left) per step, most confident first (LLaDA's linear schedule
              with low-confidence remasking); the baseline every speedup is measured against.
- "threshold" every masked position with confidence >= tau, and always the most confident one
              (Fast-dLLM). tau > 1 commits one per step; tau <= 0 commits the whole block at once.
- "factor"    the largest n such that each of the n most confident has (i + 1)(1 - c_i) < f
              (Fast-dLLM's factor rule, from the bound of its Theorem 1), at least one.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .params import InfillParams, threshold_or_default


def end_rule(ids: Tensor, end_ids: Tensor, fill_id: int) -> int | None:
    """The end rule, in place on `ids` [N]: everything after the first end token becomes
    `fill_id` (the fill ends there, whatever the later positions held). Returns that token's
    index, None when there is none."""
    hits = torch.isin(ids, end_ids).nonzero()
    if not hits.numel():
        return None
    first = int(hits[0, 0])
    ids[first + 1 :] = fill_id
    return first


def propose(
    logits: Tensor, temperature: float, top_p: float, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """logits [N, V] -> (token [N], confidence [N]); confidence is the probability of the token."""
    logits = logits.float()
    if temperature <= 0:
        probs = torch.softmax(logits, dim=-1)
        conf, token = probs.max(dim=-1)
        return token, conf
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        # Keep the smallest prefix whose mass reaches top_p (the first token always survives).
        drop = sorted_p.cumsum(-1) - sorted_p >= top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
    token = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return token, probs.gather(-1, token[:, None]).squeeze(-1)


def select_threshold(conf: Tensor, masked: Tensor, tau: float) -> Tensor:
    """conf, masked [W] -> bool [W]: masked positions with conf >= tau, plus the most confident."""
    scores = conf.masked_fill(~masked, -math.inf)
    pick = masked & (scores >= tau)
    pick[scores.argmax()] = True
    return pick


def select_factor(conf: Tensor, masked: Tensor, factor: float) -> Tensor:
    scores = conf.masked_fill(~masked, -math.inf)
    m = int(masked.sum())
    sorted_c, order = scores.sort(descending=True)
    i = torch.arange(1, m + 1, device=conf.device, dtype=conf.dtype)
    ok = (i + 1) * (1 - sorted_c[:m]) < factor
    n = max(int(ok.int().cumprod(0).sum()), 1)
    pick = torch.zeros_like(masked)
    pick[order[:n]] = True
    return pick


def select_top_k(conf: Tensor, masked: Tensor, k: int) -> Tensor:
    scores = conf.masked_fill(~masked, -math.inf)
    k = max(1, min(k, int(masked.sum())))
    pick = torch.zeros_like(masked)
    pick[scores.topk(k).indices] = True
    return pick


def fixed_k(n_masked: int, steps_per_block: int | None, block_len: int, step: int) -> int:
    """Linear schedule: spread what is still masked evenly over the steps left in the block."""
    steps = steps_per_block if steps_per_block is not None else block_len
    left = steps - step
    return n_masked if left <= 0 else math.ceil(n_masked / left)


def select(conf: Tensor, masked: Tensor, params: InfillParams, block_len: int, step: int) -> Tensor:
    """Positions to commit this step. Never empty while anything is masked."""
    if params.decode == "threshold":
        return select_threshold(conf, masked, threshold_or_default(params.threshold))
    if params.decode == "factor":
        return select_factor(conf, masked, params.factor)
    k = fixed_k(int(masked.sum()), params.steps_per_block, block_len, step)
    return select_top_k(conf, masked, k)
