"""One draft: a text proposed for the hole by something other than the model's own decoding,
with where it came from and how sure its finder is; and its form on the wire."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..fields import is_finite, is_int

SOURCES = ("document", "extra", "workspace", "ngram")
MAX_DRAFT_CHARS = 1000  # a draft's text on the wire
MAX_FEATURES = 32


@dataclass(frozen=True)
class Draft:
    text: str  # what goes at the cursor (what is typed on the line already left out)
    source: str  # one of SOURCES
    score: float  # the finder's score (weights.Weights): higher is surer
    where: str = ""  # path:line of the occurrence it was taken from
    features: tuple[float, ...] = ()  # that occurrence's features, in weights.Weights' order
    votes: int = 1  # how many occurrences of the text the finder scored

    def wire(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "source": self.source,
            "score": self.score,
            "where": self.where,
            "features": list(self.features),
            "votes": self.votes,
        }

    @classmethod
    def from_wire(cls, item: Any) -> Draft:
        """A draft as a client or a service sends it: {text, source, score, where, features,
        votes}, all but the text optional. Raises ValueError saying what is wrong."""
        if not isinstance(item, dict):
            raise ValueError("each draft must be an object with a text")
        text, source = item.get("text"), item.get("source", "workspace")
        score, where = item.get("score", 0.0), item.get("where", "")
        features, votes = item.get("features", []), item.get("votes", 1)
        if not isinstance(text, str) or not 0 < len(text) <= MAX_DRAFT_CHARS:
            raise ValueError(f"a draft's text is a string of 1 to {MAX_DRAFT_CHARS} characters")
        if source not in SOURCES:
            raise ValueError(f"a draft's source is one of {list(SOURCES)}")
        if not is_finite(score):
            raise ValueError("a draft's score is a number")
        if not isinstance(where, str) or len(where) > 1024:
            raise ValueError("a draft's where is a string")
        if (
            not isinstance(features, list | tuple)
            or len(features) > MAX_FEATURES
            or not all(is_finite(f) for f in features)
        ):
            raise ValueError(f"a draft's features are a list of at most {MAX_FEATURES} numbers")
        if not is_int(votes) or not 1 <= votes <= 1 << 20:
            raise ValueError("a draft's votes are a whole number from 1")
        return cls(text, source, float(score), where, tuple(float(f) for f in features), votes)
