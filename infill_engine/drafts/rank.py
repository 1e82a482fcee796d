"""Which completions to show, in which order: the model's fills and the drafts together, once
each is finished (decide.py, the one step that finishes and then calls `choose`).

Drafts come ranked by their finder's score (weights.Weights); the gate (gate.py) says how likely
the first of them is exactly right, from the whole list, and an automatic trigger shows it only
when that confidence is at least `gate`. A trusted model's fill that says the same as a draft
is the strongest evidence there is (two independent readers agree), so that draft goes first
whatever the gate says; an untrusted model's agreement counts for nothing (the builtin model
agreed with wrong drafts as often as with right ones, docs/drafts.md). Then:

- an automatic trigger (as the user types) shows the draft the gate passes, and the model's
  fills only when `trust_model` (a model good enough to be shown unasked; the builtin model is
  not: its fills are rarely right, docs/drafts.md). A body draft (several lines, bodies.py) is
  never shown unasked: on the calibration code nothing separated right bodies from wrong ones;
- an invoked one shows the draft the gate passes, then the model's fills, then the best other
  drafts over a floor (the user asked; a fair guess is still better than nothing); those
  drafts come before the model's fills when the model is not trusted. On a line with nothing
  typed, a comment alone or a rule (`gate.decoration`) comes after the other drafts: a header
  such as `// Rule Definition` recurs in every file of a package, so it often scores best, and
  code was wanted (on the calibration holes of the eight languages, 2,140, the first invoked
  draft was then right 310 times, not 305; none lost).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .draft import Draft
from .gate import decoration, passes

# Drafts scored under this are never shown, even asked for: under it, the best draft of the
# calibration holes of the eight languages was right too rarely to be worth the user's reading
# (82 of 3,258 holes with drafts, 4.9 % right; docs/drafts.md).
FLOOR = 2.0


@dataclass(frozen=True)
class Choice:
    text: str
    source: str  # "model", or the draft's source
    score: float | None  # the draft's score (None for a model fill)


def choose(
    fills: Sequence[str],
    found: Sequence[Draft],
    automatic: bool,
    gate: float | None,
    trust_model: bool = True,
    below_gate: int = 2,
    typed: str = "",
    language_id: str = "python",
    vetoed: frozenset[str] = frozenset(),
) -> list[Choice]:
    """The completions to show, best first, each text once. `fills` are the model's (already
    finished: empty ones dropped), `found` the drafts, best first; `typed` what is typed on the
    cursor's line before it (after the indentation), which the gate reads; `gate` the
    confidence the best draft needs (None: the threshold calibrated for `language_id`);
    `vetoed` the texts of drafts never shown (decide.vetoed), though the gate reads them: with
    the best vetoed, nothing is shown unasked."""
    said = {f.strip() for f in fills if f.strip()} if trust_model else set()
    showable = [d for d in found if d.score >= FLOOR and d.text not in vetoed]
    agreed = [d for d in showable if d.text.strip() in said]
    sure = list(found[:1]) if passes(found, typed, language_id, gate) else []
    sure = [d for d in sure if d.text not in vetoed]
    over = [
        Choice(d.text, d.source, d.score)
        for d in agreed + sure
        if not (automatic and "\n" in d.text.strip())
    ]
    under = [Choice(d.text, d.source, d.score) for d in showable]
    if not typed.strip():
        under.sort(key=lambda c: decoration(c.text, language_id))  # stable: code first
    under = [c for c in under if c not in over][:below_gate]
    filled = [Choice(f, "model", None) for f in fills if f.strip()]
    if automatic:
        order = over + (filled if trust_model else [])
    else:
        order = over + (filled + under if trust_model else under + filled)
    out: list[Choice] = []
    seen: set[str] = set()
    for c in order:
        if c.text.strip() and c.text.strip() not in seen:
            seen.add(c.text.strip())
            out.append(c)
    return out
