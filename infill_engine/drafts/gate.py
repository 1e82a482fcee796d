"""How sure the drafts' best is: the probability that the first of a ranked list of drafts is
exactly the missing text.

A draft's own score (lines.Weights) ranks the drafts of one hole well, but as a gate it knows
nothing of the competition: a line scored 5 with nothing near it is much surer than one scored
5 beside another scored 4.9. The gate reads the whole list: the best score, its margin over the
second, how many drafts there are, what is typed on the line, the best draft's length, how many
occurrences vote for it, and the features of its best occurrence. A logistic model of those,
fitted on standard-library holes (`python -m infill_engine.lab.calibrate_drafts FOLDER...
--fit-gate`; docs/drafts.md has its curve on held-out code), never on the code it is measured on.

An automatic trigger shows the best draft when its confidence is at least the gate
(`drafts.gate`, `GATE` by default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

from .draft import Draft
from .lines import Weights

# The line features of lines.Weights but the bias, as the gate reads them from the best draft.
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


# Fitted by `calibrate_drafts --fit-gate` on the standard library's asyncio, email, logging,
# importlib, concurrent, http and xml (2,100 single-line holes, docs/drafts.md).
# fmt: off
GATE_MODEL = Gate(
    mean=(3.1113, 1.3193, 1.7048, 0.369, 0.9678, 3.1392, 0.4189, 0.2206, 0.1581, 0.2037, 0.4287,
        0.8966, 0.922, 0.9511, 0.6893, 0.0018, 0.0673),
    scale=(1.5292, 1.9536, 0.7149, 0.4827, 1.3061, 0.7343, 0.6473, 0.4147, 0.3649, 0.4029,
        0.2223, 0.3045, 1.5267, 0.1604, 0.4629, 0.0424, 0.2506),
    coef=(0.4139, 0.4878, -0.2941, 0.2319, 0.2572, -0.3121, 0.4414, 0.3712, 0.1692, 0.3385,
        -0.1615, -0.0401, -0.5042, 0.1249, -0.1338, -0.0853, -0.4122),
    bias=-2.0484,
)
# fmt: on
# The confidence over which an automatic trigger shows a draft: on the calibration holes, a
# draft is then shown at 16.5 % of holes and 59 % of those are exact (docs/drafts.md).
GATE = 0.3
