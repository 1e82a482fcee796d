"""The model's view of a document: prefix and suffix around the cursor, each within a budget of
model tokens counted with the model's own tokenizer.

Each side is tokenized once, with character offsets, and cut at the token where the budget runs
out, then moved to the nearest line boundary inside the budget, so the model never sees half a
line at the far ends (unless a single line is over budget). The character window is bounded
first: code runs 3-4 characters per token, so 8x the budget is always enough.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

# text -> (start, end) character offsets of its tokens, in order
TokenSpans = Callable[[str], Sequence[tuple[int, int]]]
CHARS_PER_TOKEN_BOUND = 8


@dataclass(frozen=True)
class Context:
    prefix: str
    suffix: str
    prefix_start: int  # document offset where the prefix begins
    suffix_end: int  # document offset where the suffix ends


def build_context(
    text: str, offset: int, spans: TokenSpans, prefix_tokens: int, suffix_tokens: int
) -> Context:
    lo = max(0, offset - prefix_tokens * CHARS_PER_TOKEN_BOUND)
    before = _tail(text[lo:offset], spans, prefix_tokens)
    after = _head(
        text[offset : offset + suffix_tokens * CHARS_PER_TOKEN_BOUND], spans, suffix_tokens
    )
    return Context(before, after, offset - len(before), offset + len(after))


def _tail(s: str, spans: TokenSpans, budget: int) -> str:
    """The longest tail of s within budget tokens, starting at a line start when possible."""
    if budget <= 0 or not s:
        return ""
    toks = spans(s)
    if len(toks) <= budget:
        return s
    start = toks[len(toks) - budget][0]  # the first character the budget can keep
    nl = s.find("\n", max(0, start - 1))
    return s[nl + 1 :] if 0 <= nl < len(s) - 1 else s[start:]


def _head(s: str, spans: TokenSpans, budget: int) -> str:
    if budget <= 0 or not s:
        return ""
    toks = spans(s)
    if len(toks) <= budget:
        return s
    end = toks[budget - 1][1]  # one past the last character the budget can keep
    nl = s.rfind("\n", 0, end)
    return s[: nl + 1] if nl >= 0 else s[:end]
