"""One proposed next edit, and the gate that decides whether one is shown.

A suggestion replaces text[start:end] of the current document with `text`. Its `kind` says where
it came from (the structure tier's rules, the model's rewrite, a hosted edit engine), its
`score` how sure that source is, from 0 to 1. The gate shows at most one: the surest whose score
passes its kind's threshold, and nothing when none does. After most edits no next edit follows,
so the thresholds are fitted on replayed histories to keep false suggestions rare
(lab: dllm_lab.replay_edits).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ..fields import is_finite

# Structure (no model): "rename" the other references of a renamed name, "signature" call sites
# of a changed signature, "shape" the same change on a line of the same shape, "twin" the twin of
# a deleted line, "replace" the same replacement of text at another occurrence. "model": the
# dLLM's rewrite of an editable region. "hosted": a hosted next-edit API's answer.
KINDS: tuple[str, ...] = (
    "rename", "signature", "shape", "twin", "replace", "model", "hosted",
)  # fmt: skip
MAX_TEXT_CHARS = 4000  # a suggestion's text: an edit, not a file


@dataclass(frozen=True)
class Suggestion:
    start: int  # str offsets into the current document
    end: int
    text: str  # what replaces text[start:end]
    kind: str  # one of KINDS
    score: float  # the source's confidence, 0..1
    uri: str | None = None  # another open document's; None: the one asked about

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a suggestion's kind is one of {list(KINDS)}, not {self.kind!r}")
        if not (0 <= self.start <= self.end):
            raise ValueError("a suggestion's span is 0 <= start <= end")
        if not is_finite(self.score) or not 0.0 <= self.score <= 1.0:
            raise ValueError("a suggestion's score is a number from 0 to 1")
        if len(self.text) > MAX_TEXT_CHARS:
            raise ValueError(f"a suggestion's text is at most {MAX_TEXT_CHARS} characters")

    def applies_to(self, text: str) -> bool:
        """It fits the document and changes it."""
        return self.end <= len(text) and text[self.start : self.end] != self.text

    def applied(self, text: str) -> str:
        return text[: self.start] + self.text + text[self.end :]


@cache
def thresholds() -> Mapping[str, float]:
    """Each kind's threshold, as calibrated (infill_engine/assets/next_edits.json)."""
    raw = json.loads(
        resources.files("infill_engine").joinpath("assets/next_edits.json").read_text()
    )
    return {k: float(raw["thresholds"].get(k, 1.0)) for k in KINDS}


def gate(
    found: Iterable[Suggestion], text: str, threshold: float | None = None
) -> Suggestion | None:
    """The one suggestion to show, or None: the surest that changes the document and passes its
    kind's threshold (`threshold`, a setting, overrides them all)."""
    best: Suggestion | None = None
    for s in found:
        bar = thresholds()[s.kind] if threshold is None else threshold
        if s.score < bar or (s.uri is None and not s.applies_to(text)):
            continue
        if best is None or s.score > best.score:
            best = s
    return best
