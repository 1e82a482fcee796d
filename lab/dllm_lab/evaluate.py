"""Infill evaluation (`dllm-infill eval-infill`): how good a model is at filling code holes.

Every measurement is on data the builtin model never trained on (held-out stdlib files, and
HumanEval, which the corpus excludes):

* masked-token accuracy at mask ratios 0.15 / 0.5 / 0.9 (one full pass, `Engine.logits`), beside
  baselines measured on the same windows in the same run: the corpus unigram mode, the window's
  own most frequent token, and optionally (`--ar-baseline DIR`) an autoregressive model's
  next-token accuracy;
* exact match on held-out single lines, at a fixed span and at the oracle span (the true
  middle's token length), and on held-out function bodies at the oracle span;
* tokens committed per forward pass on those lines and bodies, at threshold τ with the dual
  cache, the figure that shows parallel decoding working;
* HumanEval-SingleLineInfilling pass@1 (greedy) at a fixed and at the oracle span, each program
  run in the sandbox (sandbox.py).

With `--task single-line|multi-line|random-span` it runs the span-length evaluation instead
(span_eval.py): fixed, planned, planned + expand/delete and oracle spans on the same holes.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch

from .corpus import SourceFile, split_corpus
from .holes import Hole
from .humaneval import DEFAULT_DATA, HUMANEVAL, PassStats, humaneval_holes, read_humaneval
from .sandbox import run_sandboxed
from .span_eval import TASK_FILES, evaluate_task, format_task

MASK_RATIOS = (0.15, 0.5, 0.9)


# -- data -------------------------------------------------------------------------------------
def heldout_texts(heldout_percent: int = 3) -> list[str]:
    _, held = split_corpus(heldout_percent=heldout_percent)
    return [f.text for f in held]


def heldout_lines(texts: Sequence[str], n: int, seed: int) -> list[Hole]:
    """Line holes: a held-out non-blank code line taken out of its file."""
    rng = random.Random(seed)
    out: list[Hole] = []
    for _ in range(n * 50):
        if len(out) >= n:
            break
        text = rng.choice(list(texts))
        lines = text.splitlines(keepends=True)
        if len(lines) < 10:
            continue
        i = rng.randrange(5, len(lines) - 1)
        line = lines[i]
        body = line.strip()
        if len(body) < 4 or body.startswith("#") or not line.endswith("\n"):
            continue
        out.append(Hole.cut("".join(lines[:i]), line, "".join(lines[i + 1 :]), "line"))
    return out


def heldout_bodies(texts: Sequence[str], n: int, seed: int) -> list[Hole]:
    """Function-body holes: the statements of a held-out function of 2-12 lines (after its
    docstring) taken out, the hole an editor's "fill function body" leaves."""
    found: list[Hole] = []
    for text in texts:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        lines = text.splitlines(keepends=True)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # keep the docstring in the prefix: it says what to write
            if not body or node.end_lineno is None:
                continue
            first, last = body[0].lineno - 1, node.end_lineno
            if not 2 <= last - first <= 12 or body[0].col_offset == 0:
                continue
            if lines[first][: body[0].col_offset].strip():
                continue  # a one-line `def f(): return x`
            prefix, body_text, suffix = (
                "".join(lines[:first]),
                "".join(lines[first:last]),
                "".join(lines[last:]),
            )
            found.append(Hole.cut(prefix, body_text, suffix, "function_body"))
    random.Random(seed).shuffle(found)
    return found[:n]


# Where the HumanEval data comes from, for a run that finds none at lab/data/ or --data.
HUMANEVAL_SOURCE = (
    "get HumanEval-SingleLineInfilling.jsonl.gz from data/ of "
    f"https://github.com/openai/human-eval-infilling (MIT) into lab/{HUMANEVAL.rsplit('/', 1)[0]}/"
    " or pass it with --data PATH"
)


# -- measurements -----------------------------------------------------------------------------
@dataclass(frozen=True)
class EvalConfig:
    model: str = "builtin"
    data: Path | None = None  # HumanEval infilling .jsonl.gz; default lab/data/humaneval-...
    limit: int | None = 100  # HumanEval problems, spread over all 164 (None = all)
    span: int = 24  # the fixed span, in tokens
    lines: int = 100  # held-out single-line holes
    bodies: int = 40  # held-out function-body holes
    windows: int = 64  # held-out windows per mask ratio
    seq_len: int = 128
    threshold: float | None = None  # τ of the threshold decode; None: the model's
    seed: int = 0
    timeout: float = 10.0  # seconds per sandboxed program
    ar_baseline: str | None = None  # a model dir trained with --objective ar
    task: str | None = None  # span_eval's task; None: the model report above

    def __post_init__(self) -> None:
        for f in ("span", "seq_len"):
            if getattr(self, f) < 1:
                raise ValueError(f"{f} must be positive, got {getattr(self, f)}")
        for f in ("lines", "bodies", "windows"):
            if getattr(self, f) < 0:
                raise ValueError(f"{f} must be >= 0, got {getattr(self, f)}")
        if self.threshold is not None and not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold}")


def sample_windows(engine: Any, texts: Sequence[str], n: int, seq_len: int, seed: int) -> Any:
    """[N, seq_len] token windows from held-out files (files shorter than a window are skipped)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ids = engine.encode(rng.choice(list(texts)))
        if len(ids) < seq_len:
            continue
        start = rng.randrange(0, len(ids) - seq_len + 1)
        out.append(ids[start : start + seq_len])
    return torch.tensor(out, dtype=torch.long).view(-1, seq_len)


def mask_positions(windows: Any, ratio: float, seed: int) -> Any:
    """[N, k] positions masked in each window; the same for every model scored on them."""
    gen = torch.Generator().manual_seed(seed)
    n, t = windows.shape
    k = max(1, round(ratio * t))
    return torch.stack([torch.randperm(t, generator=gen)[:k] for _ in range(n)]).view(n, k)


def masked_accuracy(engine: Any, windows: Any, positions: Any) -> float:
    correct = total = 0
    for window, pos in zip(windows, positions, strict=True):
        inp = window.clone()[None]
        inp[0, pos] = engine.mask_id
        pred = engine.logits(inp)[0, pos].argmax(-1).cpu()
        correct += int((pred == window[pos]).sum())
        total += len(pos)
    return correct / total if total else 0.0


def unigram_accuracy(windows: Any, positions: Any, mode: int | None) -> float:
    """Predict every masked token as one token: `mode` (the corpus unigram mode), or with None
    the most frequent unmasked token of the same window. What frequency statistics alone give."""
    correct = total = 0
    for window, pos in zip(windows, positions, strict=True):
        guess = mode
        if guess is None:
            seen = torch.ones(len(window), dtype=torch.bool)
            seen[pos] = False
            guess = Counter(window[seen].tolist()).most_common(1)[0][0]
        correct += int((window[pos] == guess).sum())
        total += len(pos)
    return correct / total if total else 0.0


def corpus_mode(engine: Any, train: Sequence[SourceFile], files: int = 200) -> int:
    """The most frequent token of the training split (its first `files` files)."""
    counts: Counter[int] = Counter()
    for f in train[:files]:
        counts.update(engine.encode(f.text))
    return counts.most_common(1)[0][0]


def next_token_accuracy(engine: Any, windows: Any) -> float:
    """An autoregressive model's accuracy on each window's tokens 1..T-1 given the ones before,
    under a causal mask (the same module, the same shifted logits)."""
    t = windows.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool, device=engine.device).tril()
    correct = total = 0
    with torch.inference_mode():
        for window in windows:
            ids = window[None].to(engine.device)
            positions = torch.arange(t, device=engine.device)[None]
            raw = engine.model(ids, positions, mask=causal)
            pred = raw[0, :-1].argmax(-1)
            correct += int((pred == ids[0, 1:]).sum())
            total += t - 1
    return correct / total if total else 0.0


def _vocab(engine: Any) -> dict[str, int] | None:
    return None if engine.tokenizer is None else dict(engine.tokenizer.get_vocab())


def _params(span: int, threshold: float | None) -> Any:
    from infill_engine import InfillParams

    return InfillParams(
        span=span, decode="threshold", threshold=threshold, cache="dual", min_tokens=1
    )


def exact_match(
    engine: Any, holes: Sequence[Hole], span: int | None, threshold: float | None
) -> PassStats:
    """Fills each hole; span None = the middle's own token length."""
    stats = PassStats()
    for hole in holes:
        n = span if span is not None else max(1, len(engine.encode(hole.middle)))
        res = engine.infill(hole.prefix, hole.suffix, _params(n, threshold))
        stats.add(res.text.rstrip() == hole.middle.rstrip(), res)
    return stats


def humaneval_pass(
    engine: Any, holes: Sequence[Hole], span: int | None, cfg: EvalConfig
) -> PassStats:
    """Each HumanEval hole's check program run on its fill; span None = oracle: the token
    length of the canonical middle."""
    stats = PassStats()
    for hole in holes:
        n = span if span is not None else max(1, len(engine.encode(hole.middle)))
        res = engine.infill(hole.prefix, hole.suffix, _params(n, cfg.threshold))
        stats.add(run_sandboxed(f"{hole.filled(res.text)}\n{hole.check}", cfg.timeout), res)
    return stats


def evaluate(cfg: EvalConfig) -> dict[str, Any]:
    from infill_engine import load

    torch.manual_seed(cfg.seed)
    t0 = time.monotonic()
    engine = load(cfg.model)
    if cfg.task is not None:
        return _span_task(engine, cfg, t0)
    train, held = split_corpus()  # one walk of the stdlib for both the baseline and the holes
    texts = [f.text for f in held]
    tau = engine.threshold if cfg.threshold is None else cfg.threshold
    report: dict[str, Any] = {"model": cfg.model, "seed": cfg.seed, "threshold": tau}
    windows = sample_windows(engine, texts, cfg.windows, cfg.seq_len, cfg.seed)
    mode = corpus_mode(engine, train)
    acc: dict[str, dict[str, float]] = {}
    # no windows (--windows 0, or no held-out file as long as --seq-len): nothing to score
    for r in MASK_RATIOS if len(windows) else ():
        pos = mask_positions(windows, r, cfg.seed)
        acc[str(r)] = {
            "model": round(masked_accuracy(engine, windows, pos), 4),
            "unigram_corpus": round(unigram_accuracy(windows, pos, mode), 4),
            "unigram_window": round(unigram_accuracy(windows, pos, None), 4),
        }
    report["masked_accuracy"] = acc
    report["windows"] = int(windows.shape[0])
    if cfg.ar_baseline and len(windows):
        ar = load(cfg.ar_baseline)
        ar_windows = sample_windows(ar, texts, cfg.windows, cfg.seq_len, cfg.seed)
        report["ar_baseline"] = {
            "model": cfg.ar_baseline,
            "next_token_accuracy": round(next_token_accuracy(ar, ar_windows), 4),
            "same_tokenizer": _vocab(ar) == _vocab(engine),
        }
    lines = heldout_lines(texts, cfg.lines, cfg.seed)
    fixed = exact_match(engine, lines, cfg.span, cfg.threshold)
    oracle = exact_match(engine, lines, None, cfg.threshold)
    bodies = exact_match(engine, heldout_bodies(texts, cfg.bodies, cfg.seed), None, cfg.threshold)
    report["heldout_lines"] = {
        "holes": fixed.total,
        "span": cfg.span,
        "exact_match_fixed_span": round(fixed.rate, 4),
        "exact_match_oracle_span": round(oracle.rate, 4),
        "tokens_per_forward_fixed": round(fixed.tokens_per_forward, 3),
        "tokens_per_forward_oracle": round(oracle.tokens_per_forward, 3),
    }
    report["heldout_bodies"] = {
        "holes": bodies.total,
        "exact_match_oracle_span": round(bodies.rate, 4),
        "tokens_per_forward": round(bodies.tokens_per_forward, 3),
        "ms_per_infill": round(bodies.ms / max(bodies.total, 1), 1),
    }
    path = cfg.data if cfg.data is not None else DEFAULT_DATA
    if path.is_file():
        problems = humaneval_holes(read_humaneval(path, cfg.limit))
        he_fixed = humaneval_pass(engine, problems, cfg.span, cfg)
        he_oracle = humaneval_pass(engine, problems, None, cfg)
        report["humaneval_single_line"] = {
            "problems": he_fixed.total,
            "span": cfg.span,
            "pass@1_fixed_span": round(he_fixed.rate, 4),
            "pass@1_oracle_span": round(he_oracle.rate, 4),
            "tokens_per_forward_fixed": round(he_fixed.tokens_per_forward, 3),
            "ms_per_infill": round(he_fixed.ms / max(he_fixed.total, 1), 1),
        }
    else:
        report["humaneval_single_line"] = None
        report["humaneval_missing"] = str(path)
    report["wall_seconds"] = round(time.monotonic() - t0, 1)
    return report


def _span_task(engine: Any, cfg: EvalConfig, t0: float) -> dict[str, Any]:
    data = cfg.data if cfg.data is not None else DEFAULT_DATA
    report = evaluate_task(
        engine,
        cfg.task or "",
        data if data.is_dir() else data.parent,
        cfg.limit,
        heldout_texts(),
        cfg.lines,
        cfg.span,
        cfg.threshold,
        cfg.timeout,
        cfg.seed,
    )
    report.update(
        model=cfg.model, threshold=engine.threshold if cfg.threshold is None else cfg.threshold
    )
    report["wall_seconds"] = round(time.monotonic() - t0, 1)
    return report


def humaneval_path(data: Path | None, task: str | None) -> Path:
    """The HumanEval-Infilling file a run reads: `--data` (a file, or with --task the folder
    of the task files) or the default in the checkout's lab/data/."""
    data = data if data is not None else DEFAULT_DATA
    if not task:
        return data
    return (data if data.is_dir() else data.parent) / TASK_FILES[task]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def format_table(report: dict[str, Any]) -> str:
    tau = report.get("threshold", 0.9)
    rows: list[tuple[str, str]] = []
    if not report["masked_accuracy"]:
        rows.append(("held-out masked-token accuracy", "skipped: no windows"))
    for r, acc in report["masked_accuracy"].items():
        rows.append((f"held-out masked-token accuracy @ {r}", _pct(acc["model"])))
        rows.append((f"  baseline: corpus unigram @ {r}", _pct(acc["unigram_corpus"])))
        rows.append((f"  baseline: window unigram @ {r}", _pct(acc["unigram_window"])))
    ar = report.get("ar_baseline")
    if ar:
        rows.append(("  baseline: AR next-token accuracy", _pct(ar["next_token_accuracy"])))
    hl, hb = report["heldout_lines"], report["heldout_bodies"]
    n, span = hl["holes"], hl["span"]
    rows += [
        (f"held-out line exact match, span {span} ({n})", _pct(hl["exact_match_fixed_span"])),
        (f"held-out line exact match, oracle span ({n})", _pct(hl["exact_match_oracle_span"])),
        (
            f"tokens per forward, lines, oracle span (τ={tau}, dual)",
            f"{hl['tokens_per_forward_oracle']:.2f}",
        ),
        (
            f"held-out function body exact match, oracle span ({hb['holes']})",
            _pct(hb["exact_match_oracle_span"]),
        ),
        (f"tokens per forward, bodies (τ={tau}, dual)", f"{hb['tokens_per_forward']:.2f}"),
    ]
    he = report.get("humaneval_single_line")
    if he:
        n, span = he["problems"], he["span"]
        rows += [
            (f"HumanEval single-line pass@1, span {span} ({n})", _pct(he["pass@1_fixed_span"])),
            (f"HumanEval single-line pass@1, oracle span ({n})", _pct(he["pass@1_oracle_span"])),
            (f"tokens per forward, HumanEval span {span}", f"{he['tokens_per_forward_fixed']:.2f}"),
            ("ms per infill (HumanEval, fixed span)", f"{he['ms_per_infill']:.1f}"),
        ]
    else:
        missing = report.get("humaneval_missing")
        rows.append(("HumanEval single-line", f"skipped: {missing} not found (see --data)"))
    width = max(len(k) for k, _ in rows)
    lines = [f"| {'metric'.ljust(width)} | value |", f"|{'-' * (width + 2)}|-------|"]
    lines += [f"| {k.ljust(width)} | {v} |" for k, v in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    d = EvalConfig()
    ap = argparse.ArgumentParser(prog="dllm-infill eval-infill", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=d.model)
    ap.add_argument("--data", type=Path, default=None, help=f"default: lab/{HUMANEVAL}")
    ap.add_argument("--limit", type=int, default=d.limit, help="HumanEval problems (0 = all)")
    ap.add_argument("--span", type=int, default=d.span, help="fixed span length in tokens")
    ap.add_argument("--lines", type=int, default=d.lines, help="held-out single-line holes")
    ap.add_argument("--bodies", type=int, default=d.bodies, help="held-out function-body holes")
    ap.add_argument("--windows", type=int, default=d.windows, help="held-out windows per ratio")
    ap.add_argument("--seq-len", type=int, default=d.seq_len)
    ap.add_argument("--threshold", type=float, default=d.threshold, help="τ; default: the model's")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--timeout", type=float, default=d.timeout, help="seconds per program")
    ap.add_argument("--ar-baseline", default=None, help="an AR-trained model dir to compare")
    ap.add_argument(
        "--task",
        choices=("single-line", "multi-line", "random-span"),
        default=None,
        help="span-length evaluation: fixed, planned, planned+expand and oracle spans side by "
        "side on HumanEval infilling (--limit problems) and held-out holes (--lines)",
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    names = {f.name for f in fields(EvalConfig)}
    values = {k: v for k, v in vars(a).items() if k in names}
    values["limit"] = values["limit"] or None
    if not (wanted := humaneval_path(a.data, a.task)).is_file():
        # said before the held-out holes take their minutes, not after they have
        print(f"dllm-infill eval-infill: HumanEval will be skipped, {wanted} not found; "
              f"{HUMANEVAL_SOURCE}", file=sys.stderr, flush=True)  # fmt: skip
    try:
        report = evaluate(EvalConfig(**values))
    except (OSError, ValueError) as e:
        print(f"dllm-infill eval-infill: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(report, indent=2))
    elif a.task:
        print(format_task(report))
    else:
        print(format_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
