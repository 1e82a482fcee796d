"""One proposed next edit, and the gate that decides whether one is shown.

A suggestion replaces text[start:end] of the current document with `text`. Its `kind` says where
it came from (the structure tier's rules, the model's rewrite, a hosted edit engine), its
`score` how sure that source is, from 0 to 1. The gate shows at most one: the surest whose score
passes its kind's threshold, and nothing when none does. After most edits no next edit follows,
so the thresholds are fitted on replayed histories to keep false suggestions rare
(lab: dllm_lab.replay_edits).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ..fields import is_finite
from ..finish.syntax import Around, Check
from .history import Edit
from .text import line_of

# Structure (no model): "rename" the other references of a renamed name, "signature" call sites
# of a changed signature, "call" the other calls of a call whose arguments changed, "shape" the
# same change on a line of the same shape, "twin" the twin of a deleted line, "pair" the other
# half of a removed preprocessor conditional, "replace" the same replacement of text at another
# occurrence. "model": the dLLM's rewrite of an editable region. "hosted": a hosted next-edit
# API's answer.
KINDS: tuple[str, ...] = (
    "rename", "signature", "call", "shape", "twin", "pair", "replace", "model", "hosted",
)  # fmt: skip
MAX_TEXT_CHARS = 4000  # a suggestion's text: an edit, not a file
# The kinds that carry the user's last edit on elsewhere: one step of a change the user makes in
# steps may break the document as the user's own step did (`for (X x : xs) {` made
# `xs.forEach(x ->`, its closing `});` still to come).
CARRIED = frozenset({"rename", "signature", "call", "shape", "twin", "pair", "replace"})


@dataclass(frozen=True)
class Suggestion:
    start: int  # str offsets into the current document
    end: int
    text: str  # what replaces text[start:end]
    kind: str  # one of KINDS
    score: float  # the source's confidence, 0..1
    uri: str | None = None  # another open document's; None: the one asked about

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a suggestion's kind is one of {list(KINDS)}, not {self.kind!r}")
        if not (0 <= self.start <= self.end):
            raise ValueError("a suggestion's span is 0 <= start <= end")
        if not is_finite(self.score) or not 0.0 <= self.score <= 1.0:
            raise ValueError("a suggestion's score is a number from 0 to 1")
        if len(self.text) > MAX_TEXT_CHARS:
            raise ValueError(f"a suggestion's text is at most {MAX_TEXT_CHARS} characters")

    def applies_to(self, text: str) -> bool:
        """It fits the document and changes it."""
        return self.end <= len(text) and text[self.start : self.end] != self.text

    def applied(self, text: str) -> str:
        return text[: self.start] + self.text + text[self.end :]


@cache
def thresholds() -> Mapping[str, float]:
    """Each kind's threshold, as calibrated (infill_engine/assets/next_edits.json)."""
    raw = json.loads(
        resources.files("infill_engine").joinpath("assets/next_edits.json").read_text()
    )
    return {k: float(raw["thresholds"].get(k, 1.0)) for k in KINDS}


def gate(
    found: Iterable[Suggestion],
    text: str,
    threshold: float | None = None,
    language_id: str | None = None,
    last: Edit | None = None,
    tree: Any | None = None,
) -> Suggestion | None:
    """The one suggestion to show, or None: the surest that changes the document, passes its
    kind's threshold (`threshold`, a setting, overrides them all) and, the document's language
    given, does not break it (`breaks`), unless it carries on the user's `last` edit, which
    broke it too. `tree`: the document's tree-sitter tree where the caller keeps one (the
    check then parses only what a suggestion changes)."""
    passing = [
        s
        for s in found
        if s.score >= (thresholds()[s.kind] if threshold is None else threshold)
        and (s.uri is not None or s.applies_to(text))
    ]
    for s in sorted(passing, key=lambda s: -s.score):  # stable: the first of equals wins
        if language_id is None or sound(s, text, language_id, last, tree):
            return s
    return None


def sound(
    s: Suggestion, text: str, language_id: str, last: Edit | None = None, tree: Any | None = None
) -> bool:
    """Whether `s` may be shown in `text` (whose tree `tree` is, where known): it does not break
    it (`breaks`; another document's is not read here), or it carries on the user's `last`
    edit, which broke it too."""
    if s.uri is not None or not breaks(s, text, language_id, tree):
        return True
    return s.kind in CARRIED and last is not None and _broke(last, text, language_id)


def breaks(s: Suggestion, text: str, language_id: str, tree: Any | None = None) -> bool:
    """Whether applying `s` to `text` adds a syntax error to it: the check every finished fill
    passes (finish/syntax.Check: tree-sitter's error and missing nodes, and in Python `compile`
    on the block around it). A language with neither is never broken. In Python, an edit that
    takes the `f` off a string that still holds a placeholder breaks it too: it parses, but
    prints `{name}` where the value stood (an `f` taken off one string, repeated on another)."""
    return _breaks(text, s.start, s.end, s.text, language_id, tree)


def _breaks(
    text: str, start: int, end: int, new: str, language_id: str, tree: Any | None = None
) -> bool:
    if language_id == "python" and _unformats(text, start, end, new):
        return True
    check = Check(Around(text[:start], text[end:], text[start:end], tree), language_id)
    return check.checked and not check.clean(new)


def _broke(last: Edit, text: str, language_id: str) -> bool:
    """Whether the user's last edit, the latest change to `text`, broke it (`breaks`)."""
    if last.clipped or text[last.start : last.end] != last.new:
        return False  # the history does not describe this text
    before = text[: last.start] + last.old + text[last.end :]
    return _breaks(before, last.start, last.start + len(last.old), last.new, language_id)


# A one-line string literal: its prefix, its quote, its body. A placeholder: `{` then a name or
# an expression's first character, not `{{` (a brace written out).
_LITERAL = re.compile(r"""(?<![\w])([A-Za-z]{0,2})(["'])((?:\\.|(?!\2)[^\\\n])*)\2""")
_PLACEHOLDER = re.compile(r"(?<!\{)\{(?!\{)[^{}\s]")


def _unformats(text: str, start: int, end: int, new: str) -> bool:
    """Whether `new` in place of text[start:end] leaves more plain strings with placeholders
    (not followed by `.format` or `%`) on its lines than stood there, and fewer f-strings."""
    lo, hi = line_of(text, start)[0], line_of(text, end)[1]
    before = text[lo:hi]
    after = text[lo:start] + new + text[end:hi]
    f0, p0 = _formats(before)
    f1, p1 = _formats(after)
    return f1 < f0 and p1 > p0


def _formats(lines: str) -> tuple[int, int]:
    """(f-strings, plain strings that hold a placeholder and are not formatted later)."""
    f = plain = 0
    for m in _LITERAL.finditer(lines):
        if "f" in m.group(1).lower():
            f += 1
        elif _PLACEHOLDER.search(m.group(3)) and not lines[m.end() :].lstrip().startswith(
            (".format", "%")
        ):
            plain += 1
    return f, plain
