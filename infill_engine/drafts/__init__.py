"""Drafts: completions proposed from what the code already says, beside the model's own fills.

Where they come from (`Draft.source`):
- `document`: lines of the request's own text (the open buffer, or the window of it a client
  sent), the cursor's line left out;
- `extra`: lines of the other files' chunks the request carried (the context store's, or
  llama.cpp's `input_extra`);
- `workspace`: lines the language server's workspace index found and sent with the call.

`gather` finds the first two here and merges the carried ones, best first; the language server
ranks them with the model's fills and gates what automatic triggers show
(lsp_server/completion/inline.py, docs/drafts.md). Only for a cursor, not a selection. A draft is
the rest of the cursor's line (lines.py), or, on an empty block body, the whole body (bodies.py).
The document is read within NEAR_ROWS rows of the cursor (nearby.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from . import lines
from .bodies import bodies
from .draft import SOURCES, Draft
from .gate import GATE, GATE_MODEL, gate_for
from .idents import IDENT
from .lines import Cursor, LineIndex, typed_before
from .nearby import Nearby, nearby
from .strangers import reads, strangers
from .weights import WEIGHTS, Weights

__all__ = [
    "GATE",
    "GATE_MODEL",
    "IN_DECODING",
    "LIMIT",
    "SOURCES",
    "WEIGHTS",
    "Cursor",
    "Draft",
    "LineIndex",
    "Nearby",
    "Weights",
    "candidates",
    "gate_for",
    "gather",
    "merge",
    "nearby",
    "typed_before",
]

LIMIT = 8  # drafts a request keeps
IN_DECODING = 3  # the best drafts a request's decoding may guess from (speculate.py)


def candidates(
    cur: Cursor, indices: Sequence[LineIndex], limit: int = LIMIT, weights: Weights = WEIGHTS
) -> list[Draft]:
    """The best `limit` drafts for the cursor from `indices`: lines (lines.py) and, on an empty
    block body, whole bodies (bodies.py), ranked together by score."""
    return merge(
        lines.candidates(cur, indices, limit, weights),
        bodies(cur, indices, limit, weights),
        limit=limit,
    )


def document_index(text: str, offset: int, first_row: int = 0) -> LineIndex:
    """The request's own text, the cursor's line left out of the candidates; `first_row`: the
    document's row where `text` starts (the rows near the cursor, nearby.py)."""
    row = text.count("\n", 0, offset)
    return LineIndex.build("", "document", text, skip=(row, row + 1), offset=first_row)


def gather(
    text: str,
    offset: int,
    extra: Sequence[tuple[str, str]] = (),
    carried: Iterable[Draft] = (),
    limit: int = LIMIT,
    python: bool = True,
    renamed: Iterable[tuple[str, str]] = (),
) -> list[Draft]:
    """Drafts for the cursor at `offset` of `text`: from the text itself, from the other files'
    chunks `extra` ((path, text), as the request carries them), and the `carried` ones a client
    found, the best `limit` distinct texts first. Imports are drafted only when `python` (the
    text is Python, or of no language known): then the chunks' imports are read too. A line
    draft that reads another function's own name is none (strangers.py), unless the name is
    one of `renamed`'s old names ((old, new): edits/renames.py), which the decision writes new
    (decide.py)."""
    near = nearby(text, offset)  # the rows around the cursor: a long document costs no more
    indices = [document_index(near.text, near.offset, near.row)]
    indices += [LineIndex.build(path, "extra", chunk, python=python) for path, chunk in extra]
    cur = Cursor.at(near.text, near.offset, python)
    found = merge(candidates(cur, indices, limit), carried, limit=limit)
    typed = set(IDENT.findall(cur.typed))  # the user's own, whoever else binds them
    read = {d.text: reads(cur.typed + d.text) - typed for d in found if "\n" not in d.text}
    away = strangers(near.text, near.offset, set().union(*read.values()), python)
    away -= {old for old, _ in renamed}
    kept = [d for d in found if not read.get(d.text, set()) & away]
    if cur.in_imports:
        # An import of names the code reads and nothing imports goes first: among imports, the
        # line that is missing is the one that binds what is missing (docs/drafts.md).
        kept.sort(key=lambda d: "\n" in d.text or not cur.binds((cur.typed + d.text).strip()))
    return kept


def merge(*groups: Iterable[Draft], limit: int = LIMIT) -> list[Draft]:
    """The drafts of all groups, one per text (its best score, and the votes of all groups:
    they drafted from different texts), best first."""
    best: dict[str, Draft] = {}
    for group in groups:
        for d in group:
            if d.text not in best:
                best[d.text] = d
            else:
                votes = best[d.text].votes + d.votes
                best[d.text] = replace(max(best[d.text], d, key=lambda x: x.score), votes=votes)
    return sorted(best.values(), key=lambda d: -d.score)[:limit]
