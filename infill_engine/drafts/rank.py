"""Which completions to show, in which order: the model's fills and the drafts together.

Drafts carry their finder's score (lines.Weights), calibrated so that the `gate` separates the
holes where a draft is usually right from those where it is usually wrong. A trusted model's
fill that says the same as a draft is the strongest evidence there is (two independent readers
agree), so that draft goes first whatever its score; an untrusted model's agreement counts for
nothing (the builtin model agreed with wrong drafts as often as with right ones, docs/drafts.md).
Then:

- an automatic trigger (as the user types) shows drafts over the gate, and the model's fills
  only when `trust_model` (a model good enough to be shown unasked; the builtin model is not:
  its fills are rarely right, docs/drafts.md). A body draft (several lines, bodies.py) is never
  shown unasked: on the calibration code no score separated right bodies from wrong ones;
- an invoked one shows drafts over the gate, then the model's fills, then the best drafts
  under the gate but over a floor (the user asked; a fair guess is still better than
  nothing); the drafts under the gate come before the model's fills when the model is not
  trusted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ..finish import finish
from ..finish.syntax import Around
from .draft import Draft

AGREE_BONUS = 4.0  # added to a draft's score when a model fill says the same
# Drafts under this score are never shown, even asked for: under it, the calibration holes'
# best draft was right too rarely to be worth the user's reading (docs/drafts.md).
FLOOR = 0.0


def finished(
    found: Iterable[Draft],
    prefix: str,
    suffix: str,
    language_id: str,
    document: Around | None = None,
) -> list[Draft]:
    """The drafts through the same finish as a fill (a line draft is the rest of the cursor's
    line and stays one line; a body draft keeps its lines): nothing shown adds a syntax error;
    those the finish empties are dropped."""
    out = []
    for d in found:
        one_line = "\n" not in d.text
        text = finish(d.text, prefix, suffix, language_id, document=document, one_line=one_line)
        if text:
            out.append(replace(d, text=text))
    return out


@dataclass(frozen=True)
class Choice:
    text: str
    source: str  # "model", or the draft's source
    score: float | None  # the draft's score (None for a model fill)


def choose(
    fills: Sequence[str],
    found: Sequence[Draft],
    automatic: bool,
    gate: float,
    trust_model: bool = True,
    below_gate: int = 2,
) -> list[Choice]:
    """The completions to show, best first, each text once. `fills` are the model's (already
    finished: empty ones dropped), `found` the drafts, best first."""
    said = {f.strip() for f in fills if f.strip()} if trust_model else set()
    scored = sorted(
        ((d.score + AGREE_BONUS * (d.text.strip() in said), d) for d in found),
        key=lambda sd: -sd[0],
    )
    over = [
        Choice(d.text, d.source, s)
        for s, d in scored
        if s >= gate and not (automatic and "\n" in d.text.strip())
    ]
    under = [Choice(d.text, d.source, s) for s, d in scored if FLOOR <= s < gate][:below_gate]
    model = [Choice(f, "model", None) for f in fills if f.strip()]
    if automatic:
        order = over + (model if trust_model else [])
    else:
        order = over + (model + under if trust_model else under + model)
    out: list[Choice] = []
    seen: set[str] = set()
    for c in order:
        if c.text.strip() and c.text.strip() not in seen:
            seen.add(c.text.strip())
            out.append(c)
    return out
