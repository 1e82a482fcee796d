"""Training of the builtin masked-diffusion code model (`dllm-infill train`).

Owns the objective and the loop. Two kinds of examples are mixed in every batch:

* LLaDA masked diffusion: t ~ U(0, 1), every token is masked with probability t, cross-entropy
  on the masked positions weighted by 1/t (normalised by the sequence length).
* Infill-shaped: a window is cut into prefix | middle | suffix (whole lines, multi-line blocks
  or random character spans), each piece tokenised on its own as the engine does. The span is a
  budget of len(middle) + extra tokens holding the middle followed by `<|endoftext|>` tokens;
  span positions are masked with probability t, so the model learns to end the span early and
  join the suffix.

Logits are the Dream-shifted ones (the token at i is scored from hidden state i-1), exactly as the
engine reads them. Everything configurable lives in train_config.json; the output is an HF-format
directory in the Dream layout (fp16 safetensors) that `infill_engine.load(dir)` reads.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer
from torch import Tensor
from tqdm import tqdm

from .corpus import SourceFile, split_corpus
from .models.common import DiffusionTransformer
from .models.dream import checkpoint_key, parse_qwen2_args
from .tokenizer_build import END_TOKEN, MASK_TOKEN, save_tokenizer, train_tokenizer

DEFAULT_CONFIG = Path(__file__).parent / "train_config.json"


def load_config(path: Path | None = None) -> dict[str, Any]:
    return dict(json.loads((path or DEFAULT_CONFIG).read_text()))


def hf_config(cfg: dict[str, Any], vocab_size: int, end_id: int, mask_id: int) -> dict[str, Any]:
    m = cfg["model"]
    return {
        "model_type": "Dream",
        "architectures": ["DreamModel"],
        "vocab_size": vocab_size,
        "hidden_size": m["hidden_size"],
        "intermediate_size": m["intermediate_size"],
        "num_hidden_layers": m["num_hidden_layers"],
        "num_attention_heads": m["num_attention_heads"],
        "num_key_value_heads": m["num_key_value_heads"],
        "rope_theta": m["rope_theta"],
        "rms_norm_eps": m["rms_norm_eps"],
        "max_position_embeddings": m["max_position_embeddings"],
        "tie_word_embeddings": m["tie_word_embeddings"],
        "hidden_act": "silu",
        "mask_token_id": mask_id,
        "pad_token_id": end_id,
        "eos_token_id": end_id,
        "bos_token_id": end_id,
        "torch_dtype": "float16",
    }


def special_ids(tok: Tokenizer) -> tuple[int, int]:
    """(end id, mask id) of a tokenizer built by tokenizer_build."""
    end_id, mask_id = tok.token_to_id(END_TOKEN), tok.token_to_id(MASK_TOKEN)
    if end_id is None or mask_id is None:
        raise ValueError(f"tokenizer lacks {END_TOKEN} or {MASK_TOKEN}")
    return int(end_id), int(mask_id)


def shifted_logits(model: DiffusionTransformer, ids: Tensor) -> Tensor:
    positions = torch.arange(ids.shape[1]).expand(ids.shape[0], -1)
    raw = model(ids, positions)
    return torch.cat([raw[:, :1], raw[:, :-1]], dim=1)


@dataclass
class Batch:
    ids: Tensor  # [B, T] model input (masked)
    targets: Tensor  # [B, T] true tokens
    masked: Tensor  # [B, T] bool, positions scored
    weight: Tensor  # [B] 1 / (t * normaliser)
    scale: Tensor | None = None  # [B, T] per-position loss scale (None = all 1)


Example = tuple[list[int], list[bool], float, list[float]]  # ids, masked, weight, scale


class Sampler:
    """Draws training examples from the corpus text, deterministically from its own RNG."""

    def __init__(
        self, files: list[SourceFile], tok: Tokenizer, cfg: dict[str, Any], seed: int
    ) -> None:
        self.texts = [f.text for f in files]
        weights = [len(t) for t in self.texts]
        total = float(sum(weights))
        self.cum: list[float] = []
        acc = 0.0
        for w in weights:
            acc += w / total
            self.cum.append(acc)
        self.tok = tok
        self.t = cfg["train"]
        self.rng = random.Random(seed)
        self.end_id, self.mask_id = special_ids(tok)

    def _text(self) -> str:
        import bisect

        i = min(bisect.bisect_left(self.cum, self.rng.random()), len(self.texts) - 1)
        return self.texts[i]

    def _encode(self, s: str) -> list[int]:
        return list(self.tok.encode(s).ids) if s else []

    def _window(self, chars: int) -> str:
        text = self._text()
        if len(text) <= chars:
            return text
        start = self.rng.randrange(0, len(text) - chars)
        nl = text.rfind("\n", 0, start)  # start at a line start, like a real file position
        start = nl + 1 if nl >= 0 and start - nl < 200 else start
        return text[start : start + chars]

    def _t(self) -> float:
        return max(self.rng.random(), 1e-3)

    def llada(self) -> Example:
        n = int(self.t["seq_len"])
        ids = self._encode(self._window(n * 6))[:n]
        ids += [self.end_id] * (n - len(ids))
        t = self._t()
        masked = [self.rng.random() < t for _ in ids]
        if not any(masked):
            masked[self.rng.randrange(n)] = True
        return ids, masked, 1.0 / (t * n), [1.0] * n

    def _cut(self, text: str) -> tuple[int, int]:
        """Character offsets [a, b) of the middle: one line, a block of lines or a random span."""
        starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n" and i + 1 < len(text)]
        kind = self.rng.random()
        if kind < 0.75 and len(starts) > 4:
            lo = len(starts) // 4
            first = self.rng.randrange(lo, max(lo + 1, len(starts) - 2))
            nlines = 1 if kind < 0.45 else self.rng.randint(2, 8)
            last = min(first + nlines, len(starts) - 1)
            return starts[first], starts[last]
        a = self.rng.randrange(len(text) // 4, max(len(text) // 4 + 1, len(text) * 3 // 4))
        return a, min(len(text), a + self.rng.randint(1, 120))

    def infill(self) -> Example:
        n = int(self.t["seq_len"])
        max_span = min(int(self.t["max_span"]), n // 2)
        for _ in range(20):
            text = self._window(n * 8)
            if len(text) < 40:
                continue
            a, b = self._cut(text)
            mid = self._encode(text[a:b])
            if not mid or len(mid) > max_span:
                continue
            if self.rng.random() < float(self.t["oracle_fraction"]):
                extra = 0
            else:
                extra = self.rng.randint(1, int(self.t["max_extra"]))
            span = min(max_span, len(mid) + extra)
            extra = span - len(mid)
            pre, suf = self._encode(text[:a]), self._encode(text[b:])
            room = n - span
            keep_suf = min(len(suf), max(room // 4, room - len(pre), self.rng.randint(0, room)))
            keep_pre = min(len(pre), room - keep_suf)
            ids = pre[len(pre) - keep_pre :] + mid + [self.end_id] * extra + suf[:keep_suf]
            start = keep_pre
            ids += [self.end_id] * (n - len(ids))
            t = self._t()
            masked = [False] * n
            for i in range(start, start + span):
                masked[i] = self.rng.random() < t
            if not any(masked[start : start + span]):
                masked[start + self.rng.randrange(span)] = True
            # The first end token marks the boundary and is what the engine's end rule acts on;
            # the padding after it is trivial once the boundary is known, so it weighs less and
            # cannot teach the model that an end token is the likeliest guess anywhere in a span.
            scale = [1.0] * n
            pad = float(self.t.get("end_pad_weight", 1.0))
            for i in range(start + len(mid) + 1, start + span):
                scale[i] = pad
            return ids, masked, 1.0 / (t * span), scale
        return self.llada()

    def batch(self, size: int) -> Batch:
        frac = float(self.t["infill_fraction"])
        rows = [self.infill() if self.rng.random() < frac else self.llada() for _ in range(size)]
        targets = torch.tensor([r[0] for r in rows], dtype=torch.long)
        masked = torch.tensor([r[1] for r in rows], dtype=torch.bool)
        ids = torch.where(masked, torch.full_like(targets, self.mask_id), targets)
        scale = torch.tensor([r[3] for r in rows], dtype=torch.float32)
        return Batch(ids, targets, masked, torch.tensor([r[2] for r in rows]), scale)


def diffusion_loss(model: DiffusionTransformer, batch: Batch) -> Tensor:
    logits = shifted_logits(model, batch.ids)
    ce = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), reduction="none")
    ce = ce.view_as(batch.targets) * batch.masked
    if batch.scale is not None:
        ce = ce * batch.scale
    return (ce.sum(1) * batch.weight).mean()


def save_model(
    model: DiffusionTransformer,
    tok: Tokenizer,
    cfg: dict[str, Any],
    out: Path,
    meta: dict[str, Any],
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    end_id, mask_id = special_ids(tok)
    config = hf_config(cfg, tok.get_vocab_size(), end_id, mask_id)
    state = {}
    for name, p in model.state_dict().items():
        if name == "lm_head.weight" and config["tie_word_embeddings"]:
            continue
        state[checkpoint_key(name)] = p.detach().to(torch.float16).contiguous()
    tmp = out / "model.safetensors.tmp"
    save_file(state, str(tmp), metadata={"format": "pt"})
    tmp.replace(out / "model.safetensors")
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_tokenizer(tok, out, model_max_length=int(cfg["model"]["max_position_embeddings"]))
    (out / "training_meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def build_model(cfg: dict[str, Any], tok: Tokenizer) -> DiffusionTransformer:
    end_id, mask_id = special_ids(tok)
    args = parse_qwen2_args(hf_config(cfg, tok.get_vocab_size(), end_id, mask_id))
    model = DiffusionTransformer(args)
    for name, p in model.named_parameters():
        if p.dim() == 2:
            std = 0.02 if "embed" in name else 0.02 / math.sqrt(1 if "proj" not in name else 2)
            torch.nn.init.normal_(p, std=std)
        elif name.endswith("bias"):
            torch.nn.init.zeros_(p)
    return model


def lr_at(step: int, frac_done: float, cfg: dict[str, Any]) -> float:
    t = cfg["train"]
    base = float(t["lr"])
    warm = int(t["warmup_steps"])
    if step < warm:
        return base * (step + 1) / warm
    floor = float(t["min_lr_ratio"])
    cos = 0.5 * (1 + math.cos(math.pi * min(1.0, frac_done)))
    return base * (floor + (1 - floor) * cos)


def warm_start(
    init: Path, cfg: dict[str, Any]
) -> tuple[DiffusionTransformer, Tokenizer, list[Any]]:
    """Model, tokenizer and earlier stages of a model dir this repo trained, to train further.

    The weights load through the same loader as any checkpoint; the architecture in `cfg` is
    replaced by the one the directory was trained with, so the two always agree.
    """
    from .loader import load_model_dir

    meta_path = init / "training_meta.json"
    if not meta_path.is_file():
        raise SystemExit(f"--init {init}: no training_meta.json; only dirs from this trainer")
    meta = json.loads(meta_path.read_text())
    cfg["model"] = meta["config"]["model"]
    cfg["tokenizer"] = meta["config"]["tokenizer"]
    tok = Tokenizer.from_file(str(init / "tokenizer.json"))
    loaded = load_model_dir(init, torch.device("cpu"), torch.float32, with_tokenizer=False)
    if loaded.mask_id != special_ids(tok)[1]:
        raise SystemExit(f"--init {init}: tokenizer and config disagree on the mask id")
    stages = list(meta.get("stages", [])) or [{k: v for k, v in meta.items() if k != "config"}]
    return loaded.model, tok, stages


def train(
    cfg: dict[str, Any],
    out: Path,
    files: list[SourceFile] | None = None,
    progress: bool = True,
    init: Path | None = None,
) -> dict[str, Any]:
    """Train per cfg and write the model dir to `out`; returns a summary (final loss, steps...).

    With `init`, training continues from that model dir (weights and tokenizer) with a fresh
    schedule; the summary then lists the earlier stages under "stages".
    """
    t_cfg = cfg["train"]
    seed = int(cfg["seed"])
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(int(t_cfg.get("threads", 2)))
    if files is None:
        c = cfg["corpus"]
        files, _ = split_corpus(heldout_percent=int(c["heldout_percent"]), max_files=c["max_files"])
    stages: list[Any] = []
    if init is not None:
        model, tok, stages = warm_start(init, cfg)
    else:
        tok = train_tokenizer((f.text for f in files), int(cfg["tokenizer"]["vocab_size"]))
        model = build_model(cfg, tok)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": float(t_cfg["weight_decay"])},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=float(t_cfg["lr"]),
        betas=(0.9, 0.95),
    )
    sampler = Sampler(files, tok, cfg, seed)
    steps, budget = int(t_cfg["steps"]), float(t_cfg["minutes"]) * 60.0
    bs = int(t_cfg["batch_size"])
    ckpt_every = float(t_cfg["checkpoint_minutes"]) * 60.0
    start = last_ckpt = time.monotonic()
    ema: float | None = None
    tokens = 0
    step = 0
    bar = tqdm(total=steps, disable=not progress, dynamic_ncols=True, mininterval=2.0)
    model.train()
    while step < steps:
        elapsed = time.monotonic() - start
        if elapsed >= budget:
            break
        frac = max(step / steps, elapsed / budget)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, frac, cfg)
        batch = sampler.batch(bs)
        loss = diffusion_loss(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), float(t_cfg["grad_clip"]))
        opt.step()
        step += 1
        tokens += batch.ids.numel()
        value = float(loss.item())
        ema = value if ema is None else 0.98 * ema + 0.02 * value
        rate = tokens / max(time.monotonic() - start, 1e-9)
        bar.update(1)
        bar.set_postfix(
            loss=f"{ema:.3f}", tok_s=f"{rate:.0f}", lr=f"{opt.param_groups[0]['lr']:.1e}"
        )
        if time.monotonic() - last_ckpt >= ckpt_every:
            model.eval()
            meta = _meta(cfg, step, ema, n_params, start, tokens, stages)
            save_model(model, tok, cfg, out, meta)
            model.train()
            last_ckpt = time.monotonic()
    bar.close()
    model.eval()
    meta = _meta(cfg, step, ema, n_params, start, tokens, stages)
    save_model(model, tok, cfg, out, meta)
    return meta


def _meta(
    cfg: dict[str, Any],
    step: int,
    ema: float | None,
    n_params: int,
    start: float,
    tokens: int,
    stages: list[Any] | None = None,
) -> dict[str, Any]:
    this = {
        "steps": step,
        "loss_ema": ema,
        "params": n_params,
        "tokens_seen": tokens,
        "wall_seconds": round(time.monotonic() - start, 1),
    }
    if not stages:
        return {**this, "config": cfg}
    done = [*stages, {**this, "init": True}]
    return {
        **this,
        "steps": sum(int(s["steps"]) for s in done),
        "tokens_seen": sum(int(s["tokens_seen"]) for s in done),
        "wall_seconds": round(sum(float(s["wall_seconds"]) for s in done), 1),
        "stages": done,
        "config": cfg,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dllm-infill train", description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, default=None, help="default: train_config.json")
    ap.add_argument("--out", type=Path, default=Path("infill_engine/assets/builtin"))
    ap.add_argument("--minutes", type=float, default=None, help="wall-clock budget")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate")
    ap.add_argument("--init", type=Path, default=None, help="continue from this model dir")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    a = ap.parse_args(argv)
    cfg = load_config(a.config)
    if a.minutes is not None:
        cfg["train"]["minutes"] = a.minutes
    if a.steps is not None:
        cfg["train"]["steps"] = a.steps
    if a.seed is not None:
        cfg["seed"] = a.seed
    if a.lr is not None:
        cfg["train"]["lr"] = a.lr
    meta = train(cfg, a.out, progress=not a.no_progress, init=a.init)
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
