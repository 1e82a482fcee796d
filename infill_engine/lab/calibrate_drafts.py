"""Fit the drafts' weights and read the gate's curve, on holes of folders of your choice.

    python -m infill_engine.lab.calibrate_drafts FOLDER [FOLDER ...] [--holes 150] [--fit]

Each folder is a package: single-line holes are cut from its Python files (lab/holes.py:
`statement` and `line`, `--holes` of each per folder), each drafted from its own document and
the folder's other files (drafts/lines.py, what the language server's index offers), and the
features of every candidate kept. Without `--fit` it prints, for the current weights, the top-1
accuracy and the gate's curve (holes shown and the share exact above each score). With
`--fit` it first fits the weights by coordinate ascent on top-1 accuracy plus half the
precision of the surest 15 %, and prints them. The shipped weights and gate
(drafts/lines.Weights, drafts.GATE) came from the standard library's asyncio, email, logging,
importlib, concurrent, http and xml packages (docs/drafts.md); held-out figures come from
eval_drafts.py on other code.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from dataclasses import astuple, fields, replace
from pathlib import Path

from ..drafts.lines import WEIGHTS, Cursor, LineIndex, Weights, occurrences
from .holes import holes

# per hole: (right, text, features) of each candidate occurrence
Cases = list[list[tuple[bool, str, tuple[float, ...]]]]


def cases(folder: Path, n: int, seed: int) -> Cases:
    files = {}
    for p in sorted(folder.rglob("*.py")):
        if "test" in p.relative_to(folder).as_posix():
            continue
        try:
            files[p] = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    workspace = {p: LineIndex.build(str(p), "workspace", t) for p, t in files.items()}
    rng = random.Random(seed)
    out: Cases = []
    for kind in ("statement", "line"):
        got = 0
        for _ in range(n * 20):
            if got >= n or not files:
                break
            path = rng.choice(list(files))
            found = holes(files[path], "python", kind, rng, 1)
            if not found:
                continue
            hole = found[0]
            row = hole.text.count("\n", 0, hole.offset)
            doc = LineIndex.build("", "document", hole.text, skip=(row, row + 1))
            cur = Cursor.at(hole.text, hole.offset)
            others = [index for q, index in workspace.items() if q != path]
            truth = (cur.typed + hole.middle).strip()
            out.append(
                [(o.text == truth, o.text, o.features) for o in occurrences(cur, [doc, *others])]
            )
            got += 1
    return out


def top1(data: Cases, weights: Weights) -> list[tuple[float, bool]]:
    """Each hole's best candidate: (its score, whether it is right); -inf where none."""
    w = astuple(weights)
    out = []
    for found in data:
        best: dict[str, tuple[float, bool]] = {}
        for ok, text, features in found:
            value = sum(a * b for a, b in zip(features, w, strict=True))
            if text not in best or value > best[text][0]:
                best[text] = (value, ok)
        out.append(max(best.values()) if best else (float("-inf"), False))
    return out


def objective(data: Cases, weights: Weights) -> float:
    top = top1(data, weights)
    surest = sorted(top, reverse=True)[: max(1, len(top) * 15 // 100)]
    return sum(ok for _, ok in top) / len(top) + 0.5 * sum(ok for _, ok in surest) / len(surest)


def fit(data: Cases, start: Weights, rounds: int = 3) -> Weights:
    """Coordinate ascent: each weight but the bias moved by a few steps while that helps."""
    w, best = start, objective(data, start)
    for _ in range(rounds):
        for f in fields(Weights):
            if f.name == "bias":
                continue
            for step in (-1.0, -0.5, -0.25, 0.25, 0.5, 1.0):
                trial = replace(w, **{f.name: getattr(w, f.name) + step})
                if (value := objective(data, trial)) > best + 1e-9:
                    w, best = trial, value
    return w


def curve(
    data: Cases, weights: Weights, gates: Sequence[float]
) -> list[tuple[float, float, float]]:
    """(gate, share of holes shown, share of those exact) for each gate."""
    top = top1(data, weights)
    out = []
    for g in gates:
        shown = [ok for value, ok in top if value >= g]
        out.append((g, len(shown) / len(top), sum(shown) / len(shown) if shown else 0.0))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m infill_engine.lab.calibrate_drafts",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--holes", type=int, default=150, help="holes of each kind per folder")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fit", action="store_true", help="fit the weights first")
    a = ap.parse_args(argv)
    data: Cases = []
    for folder in a.folders:
        data += cases(folder, a.holes, a.seed)
    if not data:
        print("calibrate_drafts: no holes found")
        return 1
    weights = fit(data, WEIGHTS) if a.fit else WEIGHTS
    if a.fit:
        print(weights)
    top = top1(data, weights)
    right = 100 * sum(ok for _, ok in top) / len(top)
    print(f"{len(data)} holes: the best draft is right for {right:.1f} %")
    print("gate   shown   exact")
    for g, shown, exact in curve(data, weights, [3.0, 4.0, 4.5, 5.0, 5.5, 6.0]):
        print(f"{g:4.1f} {100 * shown:6.1f} % {100 * exact:5.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
