"""Next-edit candidates from structure, no model: what the last edit implies elsewhere.

The last edit (history.py) is read as a change of tokens on its lines, and each rule proposes
where the same intent goes on:

* **rename**: one name replaced by another (every change on the lines the same mapping): the
  nearest other reference of the old name, in the scope of its binding when the tree says the
  edit renamed a parameter or a local (tree-sitter: a block-scoped local's block), else in the
  file; on that line, the names in the edit's role (members of the same receiver, or plain
  names). Sure when the edit was at a binding, or the same mapping was made before; unsure when
  the new name was already in use there (that is a changed argument, not a rename).
* **signature**: a parameter removed or added in a definition: the nearest call of that name with
  the old number of arguments loses that argument, or gets the parameter's name in its place.
* **call**: an argument added to or removed from one call, its others unchanged: the nearest
  other call of that name with the old number of arguments gets the same change (calls.py).
* **pair**: a preprocessor conditional's `#if` or `#endif` line removed in C or C++: its other
  half, left unpaired, goes too (pairs.py).
* **shape**: one line changed, and a line nearby has the same shape (the same tokens, names and
  numbers abstracted) and holds the same changed tokens: the same change there.
* **twin**: a line deleted whose exact twin stays in the file: the twin goes too.

Where the edits so far make a run one way down or up the file (text.heading), each rule takes
the nearest place ahead of the run before one behind it, at the same score. Scoring a place
behind lower (0.3) was tried: right of shown rose in the replay's sweeps (forward and backward,
where a place behind is never next), but where edits jump about (`replay_edits --order
shuffled`) a third of the answers went, at no gain in precision; people do not always sweep.

Each candidate's score (0..1) is the rule's confidence, read by the gate (suggestion.py), whose
thresholds are fitted on replayed histories. Every rule reads a bounded window of the document,
so a request stays in milliseconds on large files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .bindings import binding, renamed_by, renaming
from .calls import called, signature
from .history import Edit
from .pairs import paired
from .repeats import repeated
from .shapes import reshaped, twin
from .suggestion import Suggestion
from .text import (
    heading,
    in_comment,
    in_comments,
    line_of,
    lines_of,
    opcodes,
    ordered,
    receiver,
    shape,
    tokens,
    words,
)

WINDOW_LINES = 60  # shape and twin rules look this far from the edit
MAX_SCAN_CHARS = 400_000  # references and calls are looked for within this of the edit
MIN_TWIN_CHARS = 8  # a deleted line shorter than this ("}", "pass") has no meaningful twin

EARLIER = 2  # edits before the last that still propose
AGING = 0.85  # a proposal one edit older is this much less sure


def candidates(
    text: str, edits: Sequence[Edit], language_id: str, cursor: int, tree: Any | None = None
) -> list[Suggestion]:
    """Every structural candidate after the last of `edits`, best first (empty without one).
    What an earlier edit still implies (a rename not carried through yet) counts too, less
    sure the older it is."""
    found: list[Suggestion] = []
    for age in range(min(EARLIER + 1, len(edits))):
        edit = edits[len(edits) - 1 - age]
        if edit.clipped or edit.end > len(text) or text[edit.start : edit.end] != edit.new:
            break  # the history does not describe this text (a missed change): say nothing
        # The lines of the edits made since were settled by them: an older edit's proposal
        # there (often on the text a later edit wrote) is not what comes next.
        since = [lines_of(text, e) for e in edits[len(edits) - age :]]
        found += [
            replace(s, score=round(s.score * AGING**age, 4))
            for s in _after(text, edit, edits[: len(edits) - 1 - age], language_id, tree)
            if age == 0 or not any(s.start <= b and s.end >= a for a, b in since)
        ]
    return sorted(found, key=lambda s: -s.score)


def _after(
    text: str, last: Edit, earlier: Sequence[Edit], language_id: str, tree: Any | None
) -> list[Suggestion]:
    """The candidates one edit implies."""
    found: list[Suggestion] = []
    before, after = tokens(last.lines_before), tokens(last.lines_after)
    ops = [op for op in opcodes(before, after) if op[0] != "equal"]
    mapping = renaming(ops, before, after)
    if mapping is not None:
        found += _rename(text, last, mapping, earlier, tree)
        found += signature(text, last)
    elif ops:
        found += signature(text, last)
        found += called(text, last, earlier)
        found += reshaped(text, last, earlier)
    if ops:
        found += repeated(text, last, earlier, tree)
    found += twin(text, last, earlier)
    found += paired(text, last, language_id)
    return found


def _rename(
    text: str, last: Edit, mapping: tuple[str, str], earlier: Sequence[Edit], tree: Any | None
) -> list[Suggestion]:
    old, new = mapping
    at = last.start + last.new.find(new) if new in last.new else last.start
    # `_` declared nothing: a name written in its place goes on as a series (the same change
    # in the next `if _, ok := ...`), not within the block of the new declaration.
    bound, scope = binding(text, at, tree, blocks=old != "_")
    lo, hi = scope if scope is not None else (max(0, at - MAX_SCAN_CHARS), at + MAX_SCAN_CHARS)
    edited = lines_of(text, last)
    refs = [m for m in words(text, old, lo, hi) if not edited[0] <= m.start() < edited[1]]
    if not refs:
        return []
    refs = ordered(refs, heading(last, earlier), at)
    again = any(renamed_by(e) == mapping for e in earlier)
    in_use = any(True for m in words(text, new, lo, hi) if not edited[0] <= m.start() < edited[1])
    prose = in_comment(text, at, tree)
    form = shape(tokens(last.lines_before))
    # Where a series goes on: a reference on a line of the edited line's shape; else one in
    # the same kind of text (a comment's words are renamed in comments, code's in code).
    series = [m for m in refs if shape(tokens(text[slice(*line_of(text, m.start()))])) == form]
    alike = series
    if not alike:
        kinds = in_comments(text, [m.start() for m in refs], tree)
        alike = [m for m, k in zip(refs, kinds, strict=True) if k == prose]
    if not alike:
        return []
    if bound and not prose:
        score = 0.9
    elif again:
        score = 0.85 if series else 0.6
    elif prose:
        score = 0.3  # a word changed in prose
    elif in_use:
        score = 0.2  # the new name was there already: an argument changed, not a name
    else:
        score = 0.55
    line = line_of(text, alike[0].start())
    same = sorted((m for m in alike if line[0] <= m.start() < line[1]), key=lambda m: m.start())
    # Of the line's occurrences, those in the edit's role: a member of what the edit's was a
    # member of (`valve.Context(r.Context())` after `valve.Context` became `valve.Lever`), or
    # none where the edit's was no member.
    role = receiver(text, at)
    roles = [receiver(text, m.start()) for m in same]
    kept = [m for m, r in zip(same, roles, strict=True) if r == role] or [
        m for m, r in zip(same, roles, strict=True) if (r is None) == (role is None)
    ]
    same = kept or same
    start, end = same[0].start(), same[-1].end()
    piece, done = [], start
    for m in same:
        piece += [text[done : m.start()], new]
        done = m.end()
    piece.append(text[done:end])
    far = abs(text.count("\n", min(at, start), max(at, start)))
    score -= 0.1 * min(far / 200, 1.0)
    return [Suggestion(start, end, "".join(piece), "rename", round(max(score, 0.0), 4))]
