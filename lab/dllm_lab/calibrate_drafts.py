"""Fit the drafts' weights and their gate, and read the gate's curve, on holes of folders of
your choice.

    python -m dllm_lab.calibrate_drafts FOLDER [FOLDER ...] [--holes 150] [--fit]
        [--fit-gate] [--language python]

Each folder is a package: single-line holes are cut from its files of the language (by their
extension, grammars/manifest.json; JSX with JavaScript, TSX with TypeScript) (lab/holes.py:
`statement` and `line`, `--holes` of each per folder), each drafted from its own document and
the folder's other files (drafts/lines.py, what the language server's index offers), and the
features of every candidate kept. It prints, for the current weights, the top-1 accuracy, and
for the drafts as a language server serves them (the workspace's drafted apart from the
document's, merged, finished) the gate's curve (holes shown and the share exact above each
confidence; a hole inside a comment or a string, where the language server answers no
automatic trigger, is never shown), and how often the missing line stands whole anywhere in
the document or the folder's other files (what drafts, which copy lines, can get right at
most). With `--fit` it first fits the weights (a conditional logit of the missing line
against the hole's other candidates) and prints them; with `--fit-gate` it fits the gate's
logistic model (drafts/gate.py) on the served drafts and prints it, its threshold the lowest
confidence of the curve at which the shown drafts are right `--target` of the time (80 %)
and at least 2 % of holes are shown, or `--threshold` where that is decided. The shipped
weights (drafts/weights.Weights) came from the calibration code of all eight languages pooled,
each gate from its own language's (docs/drafts.md); held-out figures come from
eval_drafts.py on other code.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, astuple, dataclass, replace
from functools import cached_property
from pathlib import Path

import grammars
from infill_engine.decide import Seen, finished, vetoed
from infill_engine.drafts import candidates, gather
from infill_engine.drafts.draft import Draft
from infill_engine.drafts.gate import FEATURES, GATES_FILE, Gate, decoration, gate_for
from infill_engine.drafts.gate import features as gate_features
from infill_engine.drafts.lines import Cursor, LineIndex, Occurrence, best_occurrences, occurrences
from infill_engine.drafts.weights import WEIGHTS, Weights
from infill_engine.finish.syntax import Around
from lsp_server.completion.cursor import in_comment_or_string

from .holes import Hole, draw, source_files


@dataclass(frozen=True)
class Case:
    """One hole: its cursor, the missing line whole (stripped), every candidate occurrence (for
    fitting the weights), and the hole with the folder's other files (for the drafts as the
    language server serves them, which the gate reads)."""

    cursor: Cursor
    truth: str
    found: list[Occurrence]
    hole: Hole
    others: list[LineIndex]

    @cached_property
    def automatic(self) -> bool:
        """Whether an automatic trigger is answered here at all: the language server answers
        none inside a comment or a string (completion/cursor.py), so the gate never sees such
        a hole (a line cut inside a string literal)."""
        h = self.hole
        parser = grammars.parser(h.language_id)
        tree = parser.parse(h.text.encode("utf-8")) if parser is not None else None
        return not in_comment_or_string(tree, h.text, h.offset)

    @property
    def gated(self) -> list[Draft]:
        """The served drafts where the gate reads them, else none: an automatic trigger is
        answered here, and the best draft is no comment or rule (never shown unasked) and no
        veto of the decision's (decide.vetoed: a name nothing binds where it lands, an import
        that adds nothing)."""
        ranked = self.served if self.automatic else []
        if not ranked or decoration(ranked[0].text, self.hole.language_id):
            return []
        return [] if ranked[0].text in vetoed(ranked[:1], self.seen, True) else ranked

    @cached_property
    def seen(self) -> Seen:
        h = self.hole
        return Seen(Around(h.prefix, h.suffix), h.prefix, h.suffix, h.language_id)

    @cached_property
    def served(self) -> list[Draft]:
        """The drafts as a language server serves them (the shipped weights): the workspace's
        found apart, as its index finds them (drafts.candidates: lines and bodies), and carried
        into the engine's own from the document (drafts.gather), then finished as the decision
        finishes them (decide.finished) against the whole document."""
        h = self.hole
        workspace = candidates(self.cursor, self.others)
        found = gather(h.text, h.offset, carried=workspace, python=h.language_id == "python")
        return finished(found, self.seen)

    def right(self, d: Draft) -> bool:
        return d.text.strip() == self.hole.middle.strip()

    @property
    def anywhere(self) -> bool:
        """Whether the missing line stands whole (stripped) in the document or the folder's
        other files: the most that drafts, which copy lines, can get right."""
        texts = [self.hole.text.splitlines(), *(index.lines for index in self.others)]
        return any(self.truth in map(str.strip, lines) for lines in texts)


def cases(folder: Path, n: int, seed: int, language: str = "python") -> list[Case]:
    files = source_files(folder, language)
    python = language == "python"
    workspace = {p: LineIndex.build(str(p), "workspace", t) for p, t in files.items()}
    rng = random.Random(seed)
    out: list[Case] = []
    for kind in ("statement", "line"):
        for path, hole in draw(list(files.items()), language, kind, rng, n):
            row = hole.text.count("\n", 0, hole.offset)
            doc = LineIndex.build("", "document", hole.text, skip=(row, row + 1), python=python)
            cur = Cursor.at(hole.text, hole.offset, python)
            others = [index for q, index in workspace.items() if q != path]
            truth = (cur.typed + hole.middle).strip()
            out.append(Case(cur, truth, occurrences(cur, [doc, *others]), hole, others))
    return out


def top1(data: Sequence[Case], weights: Weights) -> list[tuple[float, bool]]:
    """Each hole's best candidate: (its score, whether it is right); -inf where none."""
    out = []
    for case in data:
        best = best_occurrences(case.found, weights)
        out.append(
            max(((v, t == case.truth) for t, (v, _) in best.items()), default=(-math.inf, False))
        )
    return out


def objective(data: Sequence[Case], weights: Weights) -> float:
    """The mean log-probability of the missing line among each hole's candidate texts, a text
    scored by its best occurrence and the texts weighed by a softmax of their scores (holes
    whose line is no candidate, or is the only one, say nothing of the ranking)."""
    total, count = 0.0, 0
    for case in _ranking(data):
        best = {t: v for t, (v, _) in best_occurrences(case.found, weights).items()}
        top = max(best.values())
        spread = math.log(sum(math.exp(v - top) for v in best.values()))
        total += best[case.truth] - top - spread
        count += 1
    return total / max(1, count)


def _ranking(data: Sequence[Case]) -> list[Case]:
    """The holes that say something of the ranking: the missing line is a candidate, and not
    the only one."""
    texts = [(c, {o.text for o in c.found}) for c in data]
    return [c for c, t in texts if c.truth in t and len(t) > 1]


def fit(data: Sequence[Case], start: Weights, rounds: int = 4, l2: float = 1.0) -> Weights:
    """The weights of a conditional logit: the missing line's text against the hole's other
    candidate texts, each scored by its best occurrence (L-BFGS, an L2 penalty of `l2` pulling
    each weight but the bias towards `start`'s). A text's best occurrence depends on the
    weights, so it is chosen again with each round's weights."""
    usable = _ranking(data)
    w = start
    for _ in range(rounds):
        w = _logit_round(usable, w, start, l2)
    return Weights(*(round(v, 2) for v in astuple(w)))


def _logit_round(usable: Sequence[Case], now: Weights, start: Weights, l2: float) -> Weights:
    """One fit of the conditional logit, each text standing for its best occurrence under
    `now`."""
    import torch

    rows: list[tuple[float, ...]] = []
    groups: list[int] = []
    right: list[int] = []
    for n, case in enumerate(usable):
        best = best_occurrences(case.found, now)
        right.append(len(rows) + list(best).index(case.truth))
        rows += [o.features for _, o in best.values()]
        groups += [n] * len(best)
    x = torch.tensor(rows, dtype=torch.float64)
    group, truth = torch.tensor(groups), torch.tensor(right)
    anchor = torch.tensor(astuple(start), dtype=torch.float64)
    weights = torch.nn.Parameter(torch.tensor(astuple(now), dtype=torch.float64))
    opt = torch.optim.LBFGS([weights], max_iter=200, line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        opt.zero_grad()
        s = x @ weights
        top = torch.full((len(usable),), -1e9, dtype=torch.float64)
        top = top.scatter_reduce(0, group, s, "amax")
        mass = torch.zeros(len(usable), dtype=torch.float64)
        lse = top + mass.index_add(0, group, torch.exp(s - top[group])).log()
        value = (lse - s[truth]).mean()
        value = value + l2 * (weights - anchor)[:-1].square().sum() / len(usable)
        value.backward()
        return value

    opt.step(loss)
    return Weights(*weights.detach().tolist())


def fit_gate(data: Sequence[Case], l2: float = 10.0, target: float = 0.8) -> Gate:
    """The gate's logistic model, fitted (L-BFGS, an L2 penalty of `l2` on the weights) on the
    holes with drafts as they are served: does the first draft say the missing line exactly?"""
    import torch

    rows, right = [], []
    for case in data:
        if ranked := case.gated:
            rows.append([0.0 if x is None else x for x in gate_features(ranked, case.cursor.typed)])
            right.append(float(case.right(ranked[0])))
    x, y = torch.tensor(rows, dtype=torch.float64), torch.tensor(right, dtype=torch.float64)
    mean, scale = x.mean(0), x.std(0).clamp_min(1e-3)
    z = (x - mean) / scale
    coef = torch.zeros(len(FEATURES), dtype=torch.float64, requires_grad=True)
    bias = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([coef, bias], max_iter=500, line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        opt.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(z @ coef + bias, y)
        value = value + l2 * coef.square().sum() / len(y)
        value.backward()
        return value

    opt.step(loss)
    fitted = Gate(
        mean=tuple(round(v, 4) for v in mean.tolist()),
        scale=tuple(round(v, 4) for v in scale.tolist()),
        coef=tuple(round(v, 4) for v in coef.detach().tolist()),
        bias=round(float(bias.detach()), 4),
    )
    return replace(fitted, threshold=threshold(data, fitted, target))


THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(2, 20))


def threshold(data: Sequence[Case], gate: Gate, target: float, least: float = 0.02) -> float:
    """The lowest confidence of THRESHOLDS at which the drafts shown are right `target` of the
    time and at least `least` of the holes are shown (the highest that shows `least`, if none
    is right that often)."""
    points = curve(data, gate, THRESHOLDS)
    some = [(t, exact) for t, shown, exact in points if shown >= least]
    for t, exact in some:
        if exact >= target:
            return t
    return some[-1][0] if some else THRESHOLDS[-1]


def write_gate(name: str, gate: Gate, path: Path = GATES_FILE) -> None:
    """Keep `gate` in the gates' file under `name`, the others as they were."""
    gates = json.loads(path.read_text(encoding="utf-8"))
    gates[name] = asdict(gate)
    rows = [
        f'  "{k}": {{\n' + ",\n".join(f'    "{f}": {json.dumps(v)}' for f, v in g.items()) + "\n  }"
        for k, g in gates.items()
    ]
    path.write_text("{\n" + ",\n".join(rows) + "\n}\n", encoding="utf-8")


def curve(
    data: Sequence[Case], gate: Gate, thresholds: Sequence[float]
) -> list[tuple[float, float, float]]:
    """(threshold, share of holes shown, share of those exact) for each confidence threshold,
    the drafts as they are served."""
    sure = []
    for case in data:
        if ranked := case.gated:
            sure.append((gate.confidence(ranked, case.cursor.typed), case.right(ranked[0])))
    out = []
    for t in thresholds:
        shown = [ok for value, ok in sure if value >= t]
        out.append((t, len(shown) / len(data), sum(shown) / len(shown) if shown else 0.0))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dllm_lab.calibrate_drafts",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--holes", type=int, default=150, help="holes of each kind per folder")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fit", action="store_true", help="fit the weights first")
    ap.add_argument("--fit-gate", action="store_true", help="fit the gate's model first")
    ap.add_argument("--language", default="python",
                    help="a languageId of the grammars, or several, comma-separated")  # fmt: skip
    ap.add_argument("--target", type=float, default=0.8, help="the fitted threshold's precision")
    ap.add_argument("--threshold", type=float,
                    help="with --fit-gate: this threshold, not the fitted one")  # fmt: skip
    ap.add_argument("--write", metavar="NAME",
                    help="with --fit-gate: keep the gate in drafts/gate.py's file under NAME "
                         "(a languageId, or 'other')")  # fmt: skip
    a = ap.parse_args(argv)
    data: list[Case] = []
    for folder in a.folders:
        for language in a.language.split(","):
            data += cases(folder, a.holes, a.seed, language)
    if not data:
        print("calibrate_drafts: no holes found")
        return 1
    weights = fit(data, WEIGHTS) if a.fit else WEIGHTS
    if a.fit:
        print(weights)
    gate = fit_gate(data, target=a.target) if a.fit_gate else gate_for(a.language)
    if a.fit_gate:
        if a.threshold is not None:
            gate = replace(gate, threshold=a.threshold)
        print(gate)
        if a.write:
            write_gate(a.write, gate)
            print(f"written to {GATES_FILE} as {a.write!r}")
    top = top1(data, weights)
    right = 100 * sum(ok for _, ok in top) / len(top)
    print(f"{len(data)} holes: the best draft is right for {right:.1f} %")
    served = 100 * sum(bool(c.served) and c.right(c.served[0]) for c in data) / len(data)
    print(f"as served, the first draft is right for {served:.1f} %")
    ceiling = 100 * sum(c.anywhere for c in data) / len(data)
    print(f"the missing line stands whole in the code for {ceiling:.1f} %")
    print("gate   shown   exact")
    for t, shown, exact in curve(data, gate, [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]):
        print(f"{t:4.2f} {100 * shown:6.1f} % {100 * exact:5.1f} %")
    t, shown, exact = curve(data, gate, [gate.threshold])[0]
    print(f"threshold {t:.2f}: {100 * shown:.1f} % shown, {100 * exact:.1f} % exact")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
