"""The span planner: what kind of hole the cursor is in, how many masks to start with, how far the
span may grow, where the construct ends, and how much context the model gets.

It is the one owner of these decisions; the language server, the CLI and the evaluation all call
`plan()`. The hole kinds:

| kind          | where the cursor is                                   | stop rule            |
|---------------|-------------------------------------------------------|----------------------|
| line          | at the end of (or inside) a line of code              | newline at depth 0   |
| expression    | inside an open bracket: an argument list, a literal   | the bracket's closer |
| statement     | on a blank line among statements, or at the start of a | newline at depth 0,  |
|               | line of code (then the newline is kept)               | or the block it opens|
| block_body    | after a block opener (`:`, `{`), the block still empty | dedent / closing `}` |
| function_body | the same, in a function                               | dedent / closing `}` |
| empty_body    | in a body holding only `pass`, `...` or `{}`          | dedent / closing `}` |
| selection     | a selected range (the editing commands)               | none                 |

The initial length comes from the same file: the token lengths of nearby lines at the cursor's
indentation (line kinds) or of sibling bodies found by the grammar's queries (`grammars/<lang>/
functions.scm`, `blocks.scm`), times a ratio per kind from `assets/span_table.json`. That table
is written by `python -m dllm_lab.span_calibrate` from holes cut in the training corpus,
not tuned by hand. With no evidence in the file, the table's default length for the kind is used.
A language without a grammar is planned from its lines alone.

Planning is on the typing path, so it stays local: the queries run only over the bytes near the
cursor (the enclosing construct, or WINDOW around it for sibling bodies), the text is parsed at
most once per call (never when the caller passes its tree), and only evidence lines and bodies
are tokenized. docs/planner.md has the measured speed and accuracy.

The package: kinds.py (the vocabulary), document.py (the tree, parsed once), classify.py (kind
and stop rule), evidence.py (same-file lengths), table.py (the calibrated ratios); this module
puts them together in `plan()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..request import DEFAULT_PARAMS, PREFIX_TOKENS, SUFFIX_TOKENS, budgets
from ..stop import StopRule
from .classify import classify
from .document import DocumentView
from .evidence import WINDOW, chars_per_token, clear_caches, same_file_length
from .kinds import KINDS, Encode, HoleKind
from .table import FALLBACK, TABLE, load_table, row

__all__ = [
    "FALLBACK",
    "KINDS",
    "TABLE",
    "WINDOW",
    "DocumentView",
    "Encode",
    "HoleKind",
    "SpanPlan",
    "budgets",
    "clear_caches",
    "load_table",
    "plan",
]


@dataclass(frozen=True)
class SpanPlan:
    kind: HoleKind
    span: int  # the masks placed at the start, in tokens
    max_span: int  # the most the span may grow to
    stop: StopRule  # where the construct ends
    prefix_tokens: int  # context budgets, within the model's positions
    suffix_tokens: int
    language_id: str
    evidence: float | None  # the same-file length (tokens) the span came from; None: default


def plan(
    text: str,
    offset: int,
    language_id: str,
    encode: Encode,
    *,
    end: int | None = None,
    tree: Any | None = None,
    max_positions: int = 4096,
    prefix_tokens: int = PREFIX_TOKENS,
    suffix_tokens: int = SUFFIX_TOKENS,
    max_span: int = DEFAULT_PARAMS.max_span,
    block_size: int = 32,
) -> SpanPlan:
    """Plan the hole at `offset` (a str offset into `text`); `end` > offset makes it a selection.

    `tree` is the document's current tree-sitter tree when the caller keeps one (the language
    server parses incrementally); without it the text is parsed here, if a grammar exists."""
    offset = max(0, min(offset, len(text)))
    doc = DocumentView(text, offset, language_id, tree)
    spec = _spec(language_id)
    comment = spec.line_comment if spec is not None else "#"
    braces = spec is not None and spec.block_style == "brace"
    lo = text.rfind("\n", 0, offset) + 1
    hi = text.find("\n", offset)
    hi = len(text) if hi < 0 else hi
    before, after = text[lo:offset], text[offset:hi]
    measured: float | None
    if end is not None and end > offset:
        kind: HoleKind = "selection"
        measured = float(len(encode(text[offset:end])))
        stop = StopRule()
    else:
        kind, stop = classify(doc, before, after, braces, comment)
        measured = same_file_length(doc, kind, before, encode)
    sizes = row(kind)
    if measured is None:
        cpt = chars_per_token(text, offset, encode)
        guess, high = sizes["default"] / cpt, sizes["default_hi"] / cpt
    else:
        guess, high = sizes["ratio"] * measured, sizes["ratio_hi"] * measured
    cap = max(1, min(max_span, max_positions // 2))
    span = max(1, min(cap, round(guess)))
    longest = max(span, min(cap, round(high) + (0 if kind == "selection" else block_size // 4)))
    pre, suf = budgets(max_positions, span, prefix_tokens, suffix_tokens)
    return SpanPlan(kind, span, longest, stop, pre, suf, language_id, measured)


def _spec(language_id: str) -> Any | None:
    import grammars

    return grammars.spec(language_id)
