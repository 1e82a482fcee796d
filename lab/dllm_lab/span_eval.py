"""Span-length evaluation (`dllm-infill eval-infill --task single-line|multi-line|random-span`).

The same holes are filled four ways, side by side in one run:

* **fixed**: a fixed span of `--span` tokens (what a planner-less server does);
* **planned**: the span planner's initial length, kind and stop rule (planner.py), with growth
  while the construct is open, exactly as the language server asks;
* **planned+expand**: the same, decoding DreamOn's `<|expand|>`/`<|delete|>` when the model has
  them (a model without them decodes as "planned");
* **oracle**: the true middle's token length, no growth (the upper bound a planner aims at).

Holes come from HumanEval infilling (`lab/data/humaneval-infilling`, each program run
with its tests in the sandbox: pass@1) and from held-out corpus files (exact match, whitespace at
the ends ignored). For every setting: the score, the share of fills whose document parses, the
mean NFE and ms per hole, and the mean span the decode ended with.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from infill_engine import planner
from infill_engine.params import InfillParams, InfillResult

from .holes import Hole
from .humaneval import PassStats, humaneval_holes, read_humaneval
from .sandbox import run_sandboxed

TASK_FILES = {
    "single-line": "HumanEval-SingleLineInfilling.jsonl.gz",
    "multi-line": "HumanEval-MultiLineInfilling.jsonl.gz",
    "random-span": "HumanEval-RandomSpanInfillingLight.jsonl.gz",
}
SETTINGS = ("fixed", "planned", "planned+expand", "oracle")


@dataclass
class SettingStats(PassStats):
    """PassStats (score, passes, ms) plus what a span setting changes: parse rate, the final
    span, and how the fills stopped."""

    parsed: int = 0
    span: int = 0
    stops: dict[str, int] = field(default_factory=dict)

    def record(self, ok: bool, parses: bool, res: InfillResult) -> None:
        self.add(ok, res)
        self.parsed += parses
        self.span += res.span
        self.stops[res.stop_reason] = self.stops.get(res.stop_reason, 0) + 1

    def row(self) -> dict[str, Any]:
        n = max(1, self.total)
        return {
            "holes": self.total,
            "score": round(self.rate, 4),
            "parse_rate": round(self.parsed / n, 4),
            "nfe": round(self.forwards / n, 2),
            "ms": round(self.ms / n, 1),
            "span": round(self.span / n, 1),
            "tokens_per_forward": round(self.tokens_per_forward, 3),
            "stops": dict(sorted(self.stops.items())),
        }


# -- holes ------------------------------------------------------------------------------------
def corpus_holes(task: str, texts: Sequence[str], n: int, seed: int) -> list[Hole]:
    """Holes shaped like the task's, cut from held-out files that parse: one whole line, 2-8
    whole lines, or a random span of 4-160 characters that starts and ends anywhere."""
    rng = random.Random(seed)
    pool = [t for t in texts if len(t.splitlines()) >= 12 and _parses(t)]
    out: list[Hole] = []
    for _ in range(n * 50):
        if len(out) >= n or not pool:
            break
        text = rng.choice(pool)
        lines = text.splitlines(keepends=True)
        if task == "random-span":
            start = rng.randrange(len(text) // 8, len(text) - 8)
            end = min(len(text), start + rng.randint(4, 160))
            middle = text[start:end]
            hole = Hole.cut(text[:start], middle, text[end:], task)
        else:
            k = 1 if task == "single-line" else rng.randint(2, 8)
            i = rng.randrange(5, max(6, len(lines) - k))
            middle = "".join(lines[i : i + k])
            hole = Hole.cut("".join(lines[:i]), middle, "".join(lines[i + k :]), task)
        if len(middle.strip()) < 4 or middle.lstrip().startswith("#"):
            continue
        out.append(hole)
    return out


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


# -- filling ----------------------------------------------------------------------------------
def fill(engine: Any, hole: Hole, setting: str, span: int, threshold: float | None) -> InfillResult:
    """One hole, one setting, greedy, threshold decode with the dual cache."""
    base = InfillParams(
        span=span, decode="threshold", threshold=threshold, cache="dual", min_tokens=1
    )
    if setting == "fixed":
        return engine.infill(hole.prefix, hole.suffix, base)
    if setting == "oracle":
        n = max(1, len(engine.encode(hole.middle)))
        return engine.infill(hole.prefix, hole.suffix, replace(base, span=n, max_span=max(n, 512)))
    p = planner.plan(
        hole.text,
        hole.offset,
        hole.language_id,
        engine.encode,
        max_positions=engine.args.max_positions,
        block_size=base.block_size,
    )
    params = replace(base, span="auto", max_span=p.max_span, expand=setting == "planned+expand")
    return engine.infill(hole.prefix, hole.suffix, params, plan=p)


def score(hole: Hole, text: str, timeout: float) -> tuple[bool, bool]:
    """(passed, parses): the tests pass (HumanEval) or the text is the middle (corpus), and the
    document with the fill in place parses."""
    document = hole.filled(text)
    parses = _parses(document)
    if hole.check is None:
        return text.strip() == hole.middle.strip(), parses
    if not parses:
        return False, False
    return run_sandboxed(f"{document}\n{hole.check}", timeout), True


def run_task(
    engine: Any,
    holes: Sequence[Hole],
    span: int,
    threshold: float | None,
    timeout: float,
    label: str,
    progress: bool = True,
) -> dict[str, dict[str, Any]]:
    stats = {s: SettingStats() for s in SETTINGS}
    for hole in tqdm(holes, desc=label, unit="hole", disable=not progress):
        for setting in SETTINGS:
            res = fill(engine, hole, setting, span, threshold)
            ok, parses = score(hole, res.text, timeout)
            stats[setting].record(ok, parses, res)
    return {s: st.row() for s, st in stats.items()}


def evaluate_task(
    engine: Any,
    task: str,
    humaneval: Path,
    limit: int | None,
    texts: Sequence[str],
    corpus: int,
    span: int,
    threshold: float | None,
    timeout: float,
    seed: int,
) -> dict[str, Any]:
    if task not in TASK_FILES:
        raise ValueError(f"unknown task {task!r}: one of {', '.join(TASK_FILES)}")
    report: dict[str, Any] = {"task": task, "span": span, "settings": list(SETTINGS)}
    path = humaneval / TASK_FILES[task]
    if path.is_file():
        rows = read_humaneval(path, limit)
        report["humaneval"] = run_task(
            engine, humaneval_holes(rows), span, threshold, timeout, f"HumanEval {task}"
        )
    else:
        report["humaneval"] = None
        report["humaneval_missing"] = str(path)
    holes = corpus_holes(task, texts, corpus, seed)
    report["heldout"] = run_task(engine, holes, span, threshold, timeout, f"held-out {task}")
    return report


def format_task(report: dict[str, Any]) -> str:
    head = "| source | setting | holes | score | parses | NFE | ms | span | tok/pass | stops |"
    lines = [
        f"Task {report['task']} (fixed span {report['span']}); score: pass@1 on HumanEval, "
        "exact match on held-out files",
        head,
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for source, name in (("humaneval", "HumanEval"), ("heldout", "held-out")):
        rows = report.get(source)
        if not rows:
            lines.append(f"| {name} | skipped: {report.get('humaneval_missing')} not found |")
            continue
        for setting, r in rows.items():
            stops = ", ".join(f"{k} {v}" for k, v in r["stops"].items())
            lines.append(
                f"| {name} | {setting} | {r['holes']} | {100 * r['score']:.1f}% | "
                f"{100 * r['parse_rate']:.1f}% | {r['nfe']:.1f} | {r['ms']:.0f} | {r['span']:.1f} "
                f"| {r['tokens_per_forward']:.2f} | {stops} |"
            )
    return "\n".join(lines)
