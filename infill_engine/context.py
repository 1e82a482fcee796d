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

Other files' chunks (`build_extra`) have a budget of their own and go before the prefix, each
under a line comment naming its file (`chunk_text`): the prefix and suffix budgets are not
touched by them. Chunks come in the caller's order, the most relevant last, nearest the prefix;
the budget keeps them from the last one back (as llama.cpp keeps the tail of `input_extra`),
the first chunk that does not fit whole cut to its last lines under its header, and the rest
dropped.
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
    extra: Extra | None = None  # other files' chunks, placed before the prefix

    @property
    def ids(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The request's ids: other files' chunks and the prefix, then the suffix."""
        head = self.extra.ids if self.extra is not None else ()
        return head + self.prefix_ids, self.suffix_ids

    @property
    def model_prefix(self) -> str:
        """What the model reads before the hole: other files' chunks, then the prefix."""
        return (self.extra.text if self.extra is not None else "") + self.prefix


@dataclass(frozen=True)
class Extra:
    """Other files' chunks as the model sees them: their text (headers included), its ids,
    and the files kept, in order (a file whose chunk was cut to its last lines included)."""

    text: str
    ids: tuple[int, ...]
    files: tuple[str, ...]


MIN_CUT_TOKENS = 16  # a chunk cut shorter than this (past its header) is dropped instead


def chunk_header(name: str, comment: str) -> str:
    """The line comment naming a chunk's file ("" for a chunk with no name)."""
    return f"{comment} {name}\n" if name else ""


def chunk_text(name: str, text: str, comment: str) -> str:
    """One chunk as placed before the prefix: its header, then its text, which ends in a
    newline."""
    return chunk_header(name, comment) + (text if text.endswith("\n") else text + "\n")


def build_extra(
    chunks: Sequence[tuple[str, str]], comment: str, tokenize: Tokenize, budget: int
) -> Extra:
    """`chunks` (file name, text), the most relevant last, cut to `budget` tokens: whole
    chunks from the last one back, then the last lines of the next under its header."""
    parts: list[tuple[str, tuple[int, ...], str]] = []  # nearest the prefix first
    left = budget
    for name, text in reversed(chunks):
        if left <= 0:
            break
        whole = chunk_text(name, text, comment)
        toks = tokenize(whole)
        if len(toks.ids) <= left:
            parts.append((whole, tuple(toks.ids), name))
            left -= len(toks.ids)
            continue
        header = chunk_header(name, comment)
        head_ids = tuple(tokenize(header).ids) if header else ()
        if left - len(head_ids) >= MIN_CUT_TOKENS:
            body = whole[len(header) :][-left * CHARS_PER_TOKEN_BOUND :]
            tail, tail_ids = _tail(body, tokenize, left - len(head_ids))
            if tail.strip():
                parts.append((header + tail, head_ids + tail_ids, name))
        break
    parts.reverse()
    return Extra(
        "".join(t for t, _, _ in parts),
        tuple(i for _, ids, _ in parts for i in ids),
        tuple(n for _, _, n in parts),
    )


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
