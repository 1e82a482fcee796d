"""The weights of a line draft's score: a weighted sum of the features of one occurrence
(lines.Occurrence), in this order, the bias last. `score` is the one definition of that sum; the
lines and bodies finders, the gate and the lab's fit all read it."""

from __future__ import annotations

from dataclasses import astuple, dataclass


@dataclass(frozen=True)
class Weights:
    """The score of one occurrence: a weighted sum of its features, the weights of a conditional
    logit of the missing line against the other candidates, fitted on holes of the calibration
    code of all eight grammar languages pooled (lab/fit_weights.sh; docs/drafts.md has the
    figures)."""

    prev: float = 2.24  # the nearest non-blank line above equals the cursor's
    prev2: float = 1.94  # the second one above equals too
    next: float = 3.77  # the nearest non-blank line below equals the cursor's
    context: float = 6.73  # word overlap (Jaccard) of the windows around both
    indent: float = 1.37  # the same indentation step from the line above
    recur: float = 0.37  # log of how often the line's text occurs
    scope: float = 4.8  # the share of its names that the document knows
    same_doc: float = -0.13  # found in the document itself
    adjacent: float = -5.95  # equals a line right next to the cursor (the suffix has it)
    ngram: float = -1.97  # continues the words before the cursor found inside another line
    bias: float = -3.0


WEIGHTS = Weights()


def score(features: tuple[float, ...], weights: Weights = WEIGHTS) -> float:
    return sum(f * w for f, w in zip(features, astuple(weights), strict=True))
