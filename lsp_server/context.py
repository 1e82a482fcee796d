"""The model's view of a document: prefix and suffix around the cursor, each within a budget of
model tokens counted with the model's own tokenizer.

Cuts fall on line boundaries where they can, so the model never sees half a line at the far ends.
Token counts are taken on a character window first (code runs 3-4 characters per token, so 8x
the budget is always enough) and then trimmed by whole lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

CountTokens = Callable[[str], int]
CHARS_PER_TOKEN_BOUND = 8


@dataclass(frozen=True)
class Context:
    prefix: str
    suffix: str
    prefix_start: int  # document offset where the prefix begins
    suffix_end: int  # document offset where the suffix ends


def build_context(
    text: str, offset: int, count: CountTokens, prefix_tokens: int, suffix_tokens: int
) -> Context:
    before = _tail(
        text[max(0, offset - prefix_tokens * CHARS_PER_TOKEN_BOUND) : offset], count, prefix_tokens
    )
    after = _head(
        text[offset : offset + suffix_tokens * CHARS_PER_TOKEN_BOUND], count, suffix_tokens
    )
    return Context(before, after, offset - len(before), offset + len(after))


def _tail(s: str, count: CountTokens, budget: int) -> str:
    """The longest tail of s within budget tokens, starting at a line start when possible."""
    if budget <= 0 or not s:
        return ""
    if count(s) <= budget:
        return s
    cuts = [i + 1 for i, c in enumerate(s) if c == "\n"]  # candidate starts, far to near
    lo, hi, best = 0, len(cuts) - 1, None
    while lo <= hi:  # the earliest line start whose tail fits
        mid = (lo + hi) // 2
        if count(s[cuts[mid] :]) <= budget:
            best, hi = cuts[mid], mid - 1
        else:
            lo = mid + 1
    if best is not None and best < len(s):
        return s[best:]
    return _chars_tail(s, count, budget)  # the cursor line alone is over budget


def _head(s: str, count: CountTokens, budget: int) -> str:
    if budget <= 0 or not s:
        return ""
    if count(s) <= budget:
        return s
    cuts = [i + 1 for i, c in enumerate(s) if c == "\n"]  # candidate ends, near to far
    lo, hi, best = 0, len(cuts) - 1, None
    while lo <= hi:  # the latest line end whose head fits
        mid = (lo + hi) // 2
        if count(s[: cuts[mid]]) <= budget:
            best, lo = cuts[mid], mid + 1
        else:
            hi = mid - 1
    if best is not None:
        return s[:best]
    return _chars_head(s, count, budget)


def _chars_tail(s: str, count: CountTokens, budget: int) -> str:
    lo, hi = 0, len(s)
    while lo < hi:  # the smallest start whose tail fits
        mid = (lo + hi) // 2
        if count(s[mid:]) <= budget:
            hi = mid
        else:
            lo = mid + 1
    return s[lo:]


def _chars_head(s: str, count: CountTokens, budget: int) -> str:
    lo, hi = 0, len(s)
    while lo < hi:  # the largest end whose head fits
        mid = (lo + hi + 1) // 2
        if count(s[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return s[:lo]
