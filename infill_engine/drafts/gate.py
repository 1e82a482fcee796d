"""How sure the drafts' best is: the probability that the first of a ranked list of drafts is
exactly the missing text.

A draft's own score (weights.Weights) ranks the drafts of one hole well, but as a gate it knows
nothing of the competition: a line scored 5 with nothing near it is much surer than one scored
5 beside another scored 4.9. The gate reads the whole list: the best score, its margin over the
second, how many drafts there are, what is typed on the line, the best draft's length, how many
occurrences vote for it, and the features of its best occurrence. A logistic model of those,
fitted on standard-library holes (`python -m dllm_lab.calibrate_drafts FOLDER...
--fit-gate`; docs/drafts.md has its curve on held-out code), never on the code it is measured on.

An automatic trigger shows the best draft when its confidence is at least the gate: the
setting (`drafts.gate`) when there is one, else the threshold calibrated for the document's
language (`Gate.threshold`; Python's is `GATE`). Code repeats itself differently in each
language (Go's `if err != nil {` recurs everywhere, C's functions come in near-copies), so
each language of the grammars has a model of its own, fitted on that language's standard
library or its best-known packages (`calibrate_drafts --language LANG --fit-gate`,
docs/drafts.md), and its threshold is the lowest at which the shown drafts were right 80 % of
the time there. A language with no model of its own gets `OTHER`, fitted on them all. A
comment alone or a rule of punctuation is never shown unasked (`decoration`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import grammars

from .blocks import is_comment
from .draft import Draft
from .weights import Weights

# The line features of weights.Weights but the bias, as the gate reads them from the best draft.
LINE_FEATURES = tuple(f.name for f in fields(Weights))[:-1]
FEATURES = (
    "score",
    "margin",
    "drafts",
    "typed",
    "typed_chars",
    "chars",
    "votes",
    *LINE_FEATURES,
)
MARGIN_CAP = 6.0  # a margin past this says no more (and is what a lone draft gets)


def features(found: Sequence[Draft], typed: str) -> list[float | None]:
    """The gate's features of a non-empty ranked list of drafts (best first), in FEATURES'
    order; None where the best draft does not carry its line features (a client's own)."""
    best = found[0]
    margin = best.score - found[1].score if len(found) > 1 else MARGIN_CAP
    line: list[float | None] = list(best.features[: len(LINE_FEATURES)])
    if len(line) != len(LINE_FEATURES):
        line = [None] * len(LINE_FEATURES)
    return [
        best.score,
        min(margin, MARGIN_CAP),
        math.log(len(found)),
        float(bool(typed)),
        math.log1p(len(typed)),
        math.log1p(len(typed) + len(best.text.strip())),
        math.log(max(1, best.votes)),
        *line,
    ]


@dataclass(frozen=True)
class Gate:
    """A logistic model over FEATURES: each feature standardised by `mean` and `scale`, then
    weighted by `coef`. A missing feature counts as its mean (it says nothing)."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    bias: float
    threshold: float = 0.3  # the confidence an automatic trigger needs, calibrated

    def confidence(self, found: Sequence[Draft], typed: str) -> float:
        """The probability that found[0] is exact (0.0 for no drafts)."""
        if not found:
            return 0.0
        z = self.bias
        columns = zip(features(found, typed), self.mean, self.scale, self.coef, strict=True)
        for x, m, s, c in columns:
            if x is not None:
                z += c * (x - m) / s
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


# The fitted models, by languageId ("other": the rest), written by `calibrate_drafts --fit-gate
# --write LANG` (docs/drafts.md has the code each came from and its curve).
GATES_FILE = Path(__file__).resolve().parent.parent / "assets" / "gates.json"


def _read(path: Path) -> dict[str, Gate]:
    out = {}
    for name, g in json.loads(path.read_text(encoding="utf-8")).items():
        out[name] = Gate(tuple(g["mean"]), tuple(g["scale"]), tuple(g["coef"]), g["bias"],
                         g["threshold"])  # fmt: skip
    return out


GATES: dict[str, Gate] = _read(GATES_FILE)
# Python's, fitted on the standard library's asyncio, email, logging, importlib, concurrent,
# http and xml (2,100 single-line holes). At its threshold, 0.3, a draft is shown at 16.4 % of
# the calibration holes and 59.9 % of those are exact (docs/drafts.md has it on held-out code).
GATE_MODEL = GATES["python"]
GATE = GATE_MODEL.threshold
OTHER = GATES.get("other", GATE_MODEL)
# The languageIds that share a model: JSX is JavaScript's, TSX TypeScript's.
FAMILY = {"javascriptreact": "javascript", "typescriptreact": "typescript"}


def gate_for(language_id: str) -> Gate:
    """The gate of a languageId: its own, its family's, or OTHER."""
    return GATES.get(FAMILY.get(language_id, language_id), OTHER)


def passes(found: Sequence[Draft], typed: str, language_id: str, gate: float | None) -> bool:
    """Whether the best of `found` is shown unasked: its language's model is at least as sure
    as `gate` (None: that model's threshold), and it says something. A comment alone or a rule
    of punctuation (`/**`, `// ====`) is never shown unasked: separators recur in every file,
    so the gate is sure of them, and on held-out TypeScript they were a third of what it showed
    wrongly."""
    if not found or decoration(found[0].text, language_id):
        return False
    model = gate_for(language_id)
    return model.confidence(found, typed) >= (model.threshold if gate is None else gate)


CLOSERS = frozenset("{}[]();,")


def decoration(text: str, language_id: str) -> bool:
    """A line that is a comment alone (in a language whose comments are known) or a rule: no
    letter or digit, and more than closing brackets (`}`, `});` close blocks and are shown).
    A block comment's inner line starts with stars and then a space, a slash or nothing
    (`* @param`, `** note`, `*/`); stars and then code are C's dereference (`*p = x;`,
    `**pp = q;`, `*(int *)at = 0;`) or a generator method (`*[Symbol.iterator]() {`)."""
    s = text.strip()
    if not any(c.isalnum() for c in s):
        return not set(s) <= CLOSERS
    spec = grammars.spec(language_id)
    if spec is None or "\n" in s:
        return False
    if spec.block_style == "brace" and s.startswith("*"):
        return is_comment(s)
    return s.startswith(
        (spec.line_comment, "/*") if spec.block_style == "brace" else spec.line_comment
    )
