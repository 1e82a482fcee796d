"""Calibrate the span planner on the training corpus, and measure it with no model at all.

`python -m infill_engine.lab.span_calibrate` cuts holes of every kind from training-corpus
files (lab/holes.py), asks the planner for each hole's evidence (the same-file length its span
scales with), and writes `infill_engine/assets/span_table.json`: per planned kind, the median
and the 97th percentile of true/evidence, and of the true length in characters for holes with
no evidence. Nothing in the table is set by hand.

`planner_accuracy` is the planner's score on holes it never saw: the share of holes whose true
token length is at most `max_span`, and the median planned/true ratio, per language and kind.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .. import planner
from .holes import HOLE_KINDS, Hole, holes

Encode = Callable[[str], list[int]]


def cut_holes(
    files: Sequence[tuple[str, str]], per_kind: int, seed: int, progress: bool = True
) -> list[Hole]:
    """Up to `per_kind` holes of each kind from each (language_id, text) file."""
    rng = random.Random(seed)
    out: list[Hole] = []
    for language_id, text in tqdm(files, desc="holes", unit="file", disable=not progress):
        for kind in HOLE_KINDS:
            out.extend(holes(text, language_id, kind, rng, per_kind))
    return out


def observe(hole: Hole, encode: Encode) -> tuple[planner.SpanPlan, int, float]:
    """The plan for a hole, the middle's true token length, and the planning time in ms."""
    t0 = time.perf_counter()
    p = planner.plan(hole.text, hole.offset, hole.language_id, encode)
    ms = (time.perf_counter() - t0) * 1000
    return p, len(encode(hole.middle)), ms


def calibrate(observed: Sequence[tuple[Hole, planner.SpanPlan, int]]) -> dict[str, Any]:
    ratios: dict[str, list[float]] = defaultdict(list)
    chars: dict[str, list[float]] = defaultdict(list)
    for hole, p, true in observed:
        if true == 0:
            continue
        chars[p.kind].append(float(len(hole.middle)))
        if p.evidence:
            ratios[p.kind].append(true / p.evidence)
    kinds: dict[str, dict[str, float]] = {}
    for kind in set(ratios) | set(chars):
        r, c = ratios.get(kind, []), chars.get(kind, [])
        if len(r) < 20 and len(c) < 20:
            continue  # too few to say anything: the planner keeps its fallback for this kind
        fallback = planner.FALLBACK[kind]
        kinds[kind] = {
            "ratio": round(statistics.median(r), 3) if len(r) >= 20 else fallback["ratio"],
            "ratio_hi": round(_quantile(r, 0.97), 3) if len(r) >= 20 else fallback["ratio_hi"],
            "default": round(statistics.median(c), 1) if c else fallback["default"],
            "default_hi": round(_quantile(c, 0.97), 1) if c else fallback["default_hi"],
            "holes": len(c),
            "with_evidence": len(r),
        }
    return kinds


def planner_accuracy(
    observed: Sequence[tuple[Hole, planner.SpanPlan, int, float]],
) -> dict[str, dict[str, Any]]:
    """Per "language/kind" (the hole's true kind): holes, fit share, median planned/true, the
    share the planner classified as that kind, and planning ms at p95."""
    groups: dict[str, list[tuple[Hole, planner.SpanPlan, int, float]]] = defaultdict(list)
    for item in observed:
        hole = item[0]
        groups[f"{hole.language_id}/{hole.kind}"].append(item)
        groups[f"{hole.language_id}/all"].append(item)
    out = {}
    for key, items in sorted(groups.items()):
        fits = [true <= p.max_span for _, p, true, _ in items if true]
        ratios = [p.span / true for _, p, true, _ in items if true]
        out[key] = {
            "holes": len(items),
            "fits_max_span": round(sum(fits) / max(1, len(fits)), 3),
            "median_planned_over_true": round(statistics.median(ratios), 2) if ratios else None,
            "kind_agrees": round(
                sum(h.kind == p.kind or _compatible(h.kind, p.kind) for h, p, _, _ in items)
                / len(items),
                3,
            ),
            "plan_ms_p95": round(_quantile([ms for *_, ms in items], 0.95), 2),
        }
    return out


def _compatible(true_kind: str, planned: str) -> bool:
    """A body hole planned as another body kind still gets a body's stop rule."""
    bodies = {"function_body", "block_body", "empty_body"}
    return true_kind in bodies and planned in bodies


def _quantile(xs: Sequence[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def encoder(model: str) -> Encode:
    """A model directory's tokenizer as a plain encode function (no weights are loaded)."""
    from ..loader import load_tokenizer, resolve_model_dir

    tok = load_tokenizer(resolve_model_dir(model))

    def encode(text: str) -> list[int]:
        return list(tok(text, add_special_tokens=False)["input_ids"]) if text else []

    return encode


def python_training_files(limit: int, seed: int) -> list[tuple[str, str]]:
    from .corpus import split_corpus

    train, _ = split_corpus(sources=("stdlib",))
    rng = random.Random(seed)
    rng.shuffle(train)
    return [("python", f.text) for f in train[:limit]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m infill_engine.lab.span_calibrate")
    ap.add_argument("--model", default="builtin", help="its tokenizer counts the tokens")
    ap.add_argument("--files", type=int, default=300, help="training files to cut holes from")
    ap.add_argument("--per-kind", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=planner.TABLE)
    args = ap.parse_args(argv)
    encode = encoder(args.model)
    files = python_training_files(args.files, args.seed)
    cut = cut_holes(files, args.per_kind, args.seed)
    observed = []
    for hole in tqdm(cut, desc="plan", unit="hole"):
        p, true, _ = observe(hole, encode)
        observed.append((hole, p, true))
    kinds = calibrate(observed)
    table = {
        "about": "written by python -m infill_engine.lab.span_calibrate; do not edit by hand",
        "source": f"{len(files)} training files of the Python corpus, {len(cut)} holes",
        "kinds": kinds,
    }
    args.out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(json.dumps(table, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
