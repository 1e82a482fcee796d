"""What inline completion reads of the edit history: a name just renamed is the name to use.

A user renames a parameter, a local or a function at its binding, then writes on. The lines
that drafts copy (the document's other lines, not carried through yet; the workspace's other
files) and the model's context still read the old name; shown as they are, they read a name
that is no longer bound there. `renames` reads, of a document's recent edits (history.py), the
renames made at a binding (bindings.py) whose scope holds the cursor: a parameter's or a
local's function, the whole document for a name bound at the top. `rename` writes a text with
them: every name token of an old name (not a member after `.`, `->` or `::`, nor anything
inside a string or a comment) becomes the new one. Renames chain (a to b, then b to c: a to c).

A rename stops holding where the old name is bound again in its scope (two functions may well
bind the same local, and a renamed one leaves the other's alone): then it is not read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .bindings import binding, renamed_by
from .history import Edit
from .text import receiver, tokens, words

Renames = tuple[tuple[str, str], ...]  # (old, new), applied in order

MAX_BINDINGS_READ = 64  # occurrences of an old name tested for a binding of their own


def renames(text: str, edits: Sequence[Edit], tree: Any | None, offset: int) -> Renames:
    """The renames of `edits` (oldest first, as History.edits() gives them) that hold at
    `offset` of `text`, chained: a name renamed twice maps to its last name, and one renamed
    back to what it was maps to nothing."""
    found: list[tuple[str, str, tuple[int, int] | None]] = []
    for edit in reversed(edits):
        if edit.clipped or edit.end > len(text) or text[edit.start : edit.end] != edit.new:
            break  # the history does not describe this text (a missed change): read no further
        pair = renamed_by(edit)
        if pair is None:
            continue
        old, new = pair
        at = edit.start + edit.new.find(new) if new in edit.new else edit.start
        bound, scope = binding(text, at, tree)
        if bound:
            found.append((old, new, scope))
    mapping: dict[str, str] = {}
    for old, new, scope in reversed(found):  # oldest first, so that later renames chain on
        lo, hi = scope if scope is not None else (0, len(text))
        if not lo <= offset <= hi or _bound_again(text, old, lo, hi, tree):
            continue
        for k, v in list(mapping.items()):
            if v == old:
                mapping[k] = new
        mapping.setdefault(old, new)
        mapping.pop(new, None)  # the new name is bound here now: an older rename of it is over
    return tuple((k, v) for k, v in mapping.items() if k != v)


def rename(text: str, pairs: Renames) -> str:
    """`text` with each old name of `pairs` written as its new one, where it is a name: not a
    member (`x.old`, `p->old`, `ns::old`), not inside a string or a comment, not part of a
    longer name."""
    if not pairs or not text:
        return text
    mapping = dict(pairs)
    if not any(next(words(text, old, 0, len(text)), None) for old in mapping):
        return text
    out: list[str] = []
    at = skip = 0  # skip: where the comment (or the #include) a token was in ends
    for tok in tokens(text):
        if tok.start < skip:
            continue
        if text.startswith(("//", "# ", "#\t", "#\n", "#include"), tok.start):
            skip = _end(text.find("\n", tok.start), len(text))
        elif text.startswith("/*", tok.start):
            skip = _end(text.find("*/", tok.start + 2), len(text) - 2) + 2
        elif (new := mapping.get(tok.text)) is not None and receiver(text, tok.start) is None:
            out += [text[at : tok.start], new]
            at = tok.end
    return "".join(out) + text[at:] if out else text


def _end(found: int, default: int) -> int:
    return default if found < 0 else found


def _bound_again(text: str, old: str, lo: int, hi: int, tree: Any | None) -> bool:
    """Whether `old` is still bound somewhere in text[lo:hi] (the tree's binding test)."""
    named = (m for m in words(text, old, lo, hi) if text[m.start() - 1 : m.start()] != ".")
    for n, m in enumerate(named):
        if n >= MAX_BINDINGS_READ:
            return False
        if binding(text, m.start(), tree)[0]:
            return True
    return False
