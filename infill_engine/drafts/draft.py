"""One draft: a text proposed for the hole by something other than the model's own decoding,
with where it came from and how sure its finder is."""

from __future__ import annotations

from dataclasses import dataclass

SOURCES = ("document", "extra", "workspace", "ngram")


@dataclass(frozen=True)
class Draft:
    text: str  # what goes at the cursor (what is typed on the line already left out)
    source: str  # one of SOURCES
    score: float  # the finder's score (lines.Weights): higher is surer
    where: str = ""  # path:line of the occurrence it was taken from
