"""The model's view of a document: prefix and suffix around the cursor, each within a budget of
model tokens, tokenized with the model's own tokenizer exactly once.

Each side is tokenized once, with character offsets, and cut at a token boundary where the
budget runs out, moved to the nearest line boundary inside the budget, so the model never sees
half a line at the far ends (unless a single line is over budget). Byte-level BPE tokenizers
fold a newline and the next line's indentation into one token, so a line boundary lies inside
a token: the prefix starts with the first token past the newline before the first kept line
(that newline included when the token holds it), and the suffix ends with the token that holds
the last kept newline (with the next line's indentation when the token carries it). The ids of
those tokens are the request's ids: the engine does not tokenize the text again. The character
window is bounded first: code runs 3-4 characters per token, so 8x the budget is always enough.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tokens:
    """A text's tokens: their ids and (start, end) character offsets, in order."""

    ids: Sequence[int]
    spans: Sequence[tuple[int, int]]


Tokenize = Callable[[str], Tokens]


def tokenize_with(tokenizer: Any, text: str) -> Tokens:
    """`text`'s ids and character spans under a Hugging Face tokenizer, no special tokens; the
    Rust tokenizer directly when there is one (no wrapper cost)."""
    fast = getattr(tokenizer, "backend_tokenizer", None)
    if fast is not None:
        enc = fast.encode(text, add_special_tokens=False)
        return Tokens(enc.ids, enc.offsets)
    out = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    spans = [(int(a), int(b)) for a, b in out["offset_mapping"]]
    return Tokens(list(out["input_ids"]), spans)


CHARS_PER_TOKEN_BOUND = 8


@dataclass(frozen=True)
class Context:
    prefix: str
    suffix: str
    prefix_start: int  # document offset where the prefix begins
    suffix_end: int  # document offset where the suffix ends
    prefix_ids: tuple[int, ...] = ()  # the model's ids of prefix and suffix
    suffix_ids: tuple[int, ...] = ()

    @property
    def ids(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return self.prefix_ids, self.suffix_ids


def build_context(
    text: str, offset: int, tokenize: Tokenize, prefix_tokens: int, suffix_tokens: int
) -> Context:
    lo = max(0, offset - prefix_tokens * CHARS_PER_TOKEN_BOUND)
    before, before_ids = _tail(text[lo:offset], tokenize, prefix_tokens)
    window = text[offset : offset + suffix_tokens * CHARS_PER_TOKEN_BOUND]
    after, after_ids = _head(window, tokenize, suffix_tokens)
    return Context(before, after, offset - len(before), offset + len(after), before_ids, after_ids)


def _tail(s: str, tokenize: Tokenize, budget: int) -> tuple[str, tuple[int, ...]]:
    """The longest tail of s within budget tokens, starting at a line start when possible."""
    if budget <= 0 or not s:
        return "", ()
    toks = tokenize(s)
    n = len(toks.spans)
    if n <= budget:
        return s, tuple(toks.ids)
    first = n - budget  # the first token the budget can keep
    start = toks.spans[first][0]
    nl = s.find("\n", max(0, start - 1))
    if 0 <= nl < len(s) - 1:
        # the first token past that newline; it may begin with the newline itself. None past
        # it: what follows is whitespace the tokenizer leaves out
        first = next((i for i in range(first, n) if toks.spans[i][1] > nl + 1), n)
        start = min(toks.spans[first][0], nl + 1) if first < n else nl + 1
    return s[start:], tuple(toks.ids[first:])


def _head(s: str, tokenize: Tokenize, budget: int) -> tuple[str, tuple[int, ...]]:
    """The longest head of s within budget tokens, ending at a line end when possible."""
    if budget <= 0 or not s:
        return "", ()
    toks = tokenize(s)
    if len(toks.spans) <= budget:
        return s, tuple(toks.ids)
    last = budget - 1  # the last token the budget can keep
    end = toks.spans[last][1]
    nl = s.rfind("\n", 0, end)
    if nl >= 0:
        # the last token that starts by that newline; it may carry the next line's indentation
        last = max((i for i in range(last + 1) if toks.spans[i][0] <= nl), default=-1)
        end = max(toks.spans[last][1] if last >= 0 else 0, nl + 1)
    return s[:end], tuple(toks.ids[: last + 1])
