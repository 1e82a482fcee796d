"""Guessed states and drafts inside decoding (speculate.py), against plain decoding, on a
repository of your choice.

    python -m dllm_lab.eval_speculate REPO [REPO ...] [--holes 60] [--lookahead 4]

Single-line holes are cut from each repository's non-test Python files (lab/eval_drafts.py's
`repo_holes`). Each hole is prepared as the service prepares a call (plan, context, drafts from
the file: service/native.py), then decoded three ways by the same engine: plain threshold
decoding (`speculate="off"`), the exact mode and the fast mode. Each mode runs the holes one at
a time, then all of them as one batch (rows of the step loop, as the scheduler runs them).

Printed per mode: whether its tokens equal plain decoding's (every hole, alone and batched),
forward passes per hole (a pass with guesses is one pass), tokens per pass, steps taken on a
guess, tokens committed from a draft, exact match against the missing line, and the wall time.
On a CPU every guess is another row of work, so the time is the cost there; on a GPU a window
pass of a few more rows costs about one pass (it reads the same weights once).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infill_engine.params import InfillParams, InfillResult, SpeculateMode
from infill_engine.request import InfillRequest

from .eval_drafts import KINDS, repo_holes

MODES: tuple[SpeculateMode, ...] = ("off", "exact", "fast")


@dataclass
class Tally:
    holes: int = 0
    same_alone: int = 0
    same_batched: int = 0
    passes: int = 0
    tokens: int = 0
    verified: int = 0
    drafted: int = 0
    exact: int = 0
    seconds: float = 0.0
    batch_seconds: float = 0.0

    def row(self, mode: str) -> dict[str, Any]:
        n = max(self.holes, 1)
        return {
            "mode": mode,
            "holes": self.holes,
            "same_as_plain_alone": self.same_alone / n,
            "same_as_plain_batched": self.same_batched / n,
            "passes_per_hole": self.passes / n,
            "tokens_per_pass": self.tokens / max(self.passes, 1),
            "guessed_steps_per_hole": self.verified / n,
            "drafted_tokens_per_hole": self.drafted / n,
            "exact_match": self.exact / n,
            "ms_per_hole_alone": 1000 * self.seconds / n,
            "ms_per_hole_batched": 1000 * self.batch_seconds / n,
        }


def prepared(
    engine: Any, root: Path, n: int, seed: int, kinds: Sequence[str] = KINDS
) -> list[tuple[InfillRequest, str]]:
    """Each hole's first row as the service builds it (with the file's drafts), and its truth."""
    from infill_engine.hole import Hole, prepare

    out = []
    params = InfillParams(min_tokens=1, speculate="fast")
    for _, case in repo_holes(root, n, seed, kinds=kinds):
        ask = Hole(case.text, case.offset, language_id="python", priority="invoked", params=params)
        out.append((prepare(engine, ask).requests[0], case.middle))
    return out


def measure(
    engine: Any, cases: list[tuple[InfillRequest, str]], lookahead: int
) -> list[dict[str, Any]]:
    plain: list[list[int]] = []
    rows = []
    for mode in MODES:
        asks = [
            replace(r, params=replace(r.params, speculate=mode, lookahead=lookahead))
            for r, _ in cases
        ]
        tally = Tally(holes=len(asks))
        alone: list[InfillResult] = []
        t0 = time.perf_counter()
        for ask in asks:
            alone += engine.run([ask])
        tally.seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        batched = engine.run(asks)
        tally.batch_seconds = time.perf_counter() - t0
        if mode == "off":
            plain = [r.token_ids for r in alone]
        for i, (res, (_, truth)) in enumerate(zip(alone, cases, strict=True)):
            tally.same_alone += res.token_ids == plain[i]
            tally.same_batched += batched[i].token_ids == plain[i]
            tally.passes += res.nfe
            tally.tokens += res.tokens
            tally.verified += res.verified
            tally.drafted += res.drafted
            tally.exact += res.text.strip() == truth.strip()
        rows.append(tally.row(mode))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dllm_lab.eval_speculate")
    ap.add_argument("repos", nargs="+", type=Path, help="repository checkouts")
    ap.add_argument("--holes", type=int, default=60, help="holes per repository")
    ap.add_argument("--lookahead", type=int, default=4, help="guesses per row and pass")
    ap.add_argument(
        "--kinds", default=",".join(KINDS), help="hole kinds, comma-separated (lab/holes.py)"
    )
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the rows here")
    a = ap.parse_args(argv)
    from infill_engine import load

    engine = load(a.model, device="cpu")
    report: dict[str, Any] = {}
    for root in a.repos:
        if not root.is_dir():
            print(f"error: {root} is not a directory", file=sys.stderr)
            return 2
        cases = prepared(engine, root, a.holes, a.seed, a.kinds.split(","))
        with_drafts = sum(bool(r.drafts) for r, _ in cases)
        rows = measure(engine, cases, a.lookahead)
        report[root.name] = {"holes": len(cases), "with_drafts": with_drafts, "modes": rows}
        print(f"{root.name}: {len(cases)} holes, {with_drafts} with drafts")
        for r in rows:
            print(
                f"  {r['mode']:5} same as plain {r['same_as_plain_alone']:6.1%} alone "
                f"{r['same_as_plain_batched']:6.1%} batched | passes/hole "
                f"{r['passes_per_hole']:5.2f} tokens/pass {r['tokens_per_pass']:4.2f} | "
                f"guessed steps {r['guessed_steps_per_hole']:4.2f} drafted tokens "
                f"{r['drafted_tokens_per_hole']:4.2f} | exact {r['exact_match']:5.1%} | "
                f"{r['ms_per_hole_alone']:6.1f} ms alone {r['ms_per_hole_batched']:6.1f} batched"
            )
    engine.close()
    if a.json:
        a.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
