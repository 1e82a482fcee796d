"""The rules of calls: a change in how many arguments a function takes goes on to its other calls.

* **signature**: a definition's parameter list changed by one parameter, and the nearest call of
  that name with the old number of arguments follows (an argument removed, or the new
  parameter's name passed in its place).
* **call**: one call's arguments changed by one argument, its others as they were (`jv_dump(x)`
  made `jv_dump(x, 0)`: the function's signature changed elsewhere, and its calls are brought
  up to date one by one), and the nearest other call of that name with the old number of
  arguments follows: the same argument written at the same place, or the argument at that
  place removed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..lexer import group_end, parts
from .history import Edit
from .suggestion import Suggestion
from .text import line_of, lines_of, words

MAX_SCAN_CHARS = 400_000  # calls are looked for within this of the edit
# Words before "(" that are no call: control flow, and operators some languages spell as words.
NOT_CALLS = frozenset({
    "if", "for", "while", "switch", "catch", "return", "sizeof", "typeof", "alignof", "decltype",
    "elif", "and", "or", "not", "in", "is", "with", "match", "when", "until", "foreach", "using",
    "lock", "fixed", "new", "delete", "throw", "await", "yield", "case",
})  # fmt: skip
_CALL = re.compile(r"([A-Za-z_$][\w$]*)[ \t]*\(")


def signature(text: str, last: Edit) -> list[Suggestion]:
    """A definition's parameter list changed by one parameter: the nearest call with the old
    number of arguments follows."""
    old_sig, new_sig = _header(last.lines_before), _header(last.lines_after)
    if old_sig is None or new_sig is None or old_sig[0] != new_sig[0]:
        return []
    name, old_params, new_params = old_sig[0], old_sig[1], new_sig[1]
    if abs(len(old_params) - len(new_params)) != 1:
        return []
    removed = len(new_params) < len(old_params)
    short, long = (new_params, old_params) if removed else (old_params, new_params)
    k = next((i for i in range(len(short)) if short[i] != long[i]), len(short))
    if short != long[:k] + long[k + 1 :]:
        return []
    added = long[k]
    if not removed and ("=" in added or added.startswith("*")):
        return []  # a default or a rest parameter asks nothing of the callers
    arg_name = re.match(r"[A-Za-z_$][\w$]*", added.split(":")[0].strip().lstrip("&*"))
    if not removed and arg_name is None:
        return []
    written = "" if removed or arg_name is None else arg_name.group(0)
    change = ArgumentChange(name, len(old_params), k, written, None)
    return _nearest(text, last, change, "signature", 0.75 if removed else 0.55, definitions=True)


_HEADER = re.compile(
    r"(?:def|fn|func|function)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)\s*(?:<[^>]*>)?\s*\(([^)]*)\)"
    r"|([A-Za-z_$][\w$]*)\s*\(([^()]*)\)\s*(?:const\s*)?(?:->[^{]*)?\{"
)


def _header(line: str) -> tuple[str, list[str]] | None:
    m = _HEADER.search(line)
    if m is None:
        return None
    name, params = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    if name in ("if", "for", "while", "switch", "catch", "return"):
        return None
    parts = [p.strip() for p in _split_top(params)]
    return name, [p for p in parts if p and p not in ("self", "cls", "this")]


def _split_top(s: str) -> list[str]:
    out, depth, cur = list[str](), 0, list[str]()
    for ch in s:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _arguments(text: str, open_at: int) -> tuple[list[tuple[int, int]], int] | None:
    """The str spans of a call's arguments (stripped) from its "(" at open_at, and where the
    call's ")" ends; None when it does not close within a few lines' worth of text."""
    window = text[open_at : open_at + 2000]
    end = group_end(window, 0)
    if end is None:
        return None
    inner, base = window[1 : end - 1], open_at + 1
    out = []
    for a, b in parts(inner):
        piece = inner[a:b]
        lead = len(piece) - len(piece.lstrip())
        out.append((base + a + lead, base + a + len(piece.rstrip())))
    return ([] if out == [(base, base)] else out), open_at + end


def called(text: str, last: Edit, earlier: Sequence[Edit] = ()) -> list[Suggestion]:
    """One call's arguments changed by one, the rest of its lines as they were: the nearest
    other call of that name with the old number of arguments gets the same change (a keyword
    argument, `pop=True`, is found by its keyword wherever it stands). Sure where an earlier
    edit made the same change at another call (a series); unsure after the first."""
    if _header(last.lines_before) is not None or _header(last.lines_after) is not None:
        return []  # a definition's change is the signature rule's
    change = _argument_change(last.lines_before, last.lines_after)
    if change is None:
        return []
    again = any(
        (c := _argument_change(e.lines_before, e.lines_after)) is not None and c.key == change.key
        for e in earlier
    )
    return _nearest(text, last, change, "call", 0.7 if again else 0.45, definitions=False)


def _nearest(
    text: str, last: Edit, change: ArgumentChange, kind: str, score: float, definitions: bool
) -> list[Suggestion]:
    """`change` made at the nearest call of its name where it goes, off the edited lines (and,
    unless `definitions`, not on a definition's line)."""
    edited = lines_of(text, last)
    lo, hi = max(0, last.start - MAX_SCAN_CHARS), last.start + MAX_SCAN_CHARS
    best: Suggestion | None = None
    for m in words(text, change.name, lo, hi):
        if edited[0] <= m.start() < edited[1] or not text.startswith("(", m.end()):
            continue
        found = _arguments(text, m.end())
        if found is None:
            continue
        spans = found[0]
        if not definitions and _header(text[slice(*line_of(text, m.start()))]) is not None:
            continue  # the definition itself, or another of the name
        k = change.at([text[a:b] for a, b in spans])
        if k is None:
            continue
        sug = _changed_at(spans, k, change.written, m.end(), kind, score)
        if best is None or abs(sug.start - last.start) < abs(best.start - last.start):
            best = sug
    return [best] if best is not None else []


_KEYWORD = re.compile(r"([A-Za-z_][\w]*)\s*=(?!=)")


def _keyword(argument: str) -> str | None:
    m = _KEYWORD.match(argument)
    return m.group(1) if m else None


@dataclass(frozen=True)
class ArgumentChange:
    """Argument k of calls of `name` with `count` arguments: `written` there, or (written "")
    removed; `keyword` the argument's keyword where it has one."""

    name: str
    count: int
    k: int
    written: str
    keyword: str | None

    @property
    def key(self) -> tuple[str, int, int, str, str | None]:
        """What two edits share when they make the same change (a keyword removed: its
        keyword, wherever it stood)."""
        if self.keyword is not None and not self.written:
            return (self.name, -1, -1, "", self.keyword)
        return (self.name, self.count, self.k, self.written, self.keyword)

    def at(self, args: list[str]) -> int | None:
        """Where this change goes in a call with these arguments; None where it does not."""
        held = [_keyword(a) for a in args]
        if self.keyword is not None and not self.written:  # removed: found by its keyword
            return held.index(self.keyword) if self.keyword in held else None
        if len(args) != self.count or (self.keyword is not None and self.keyword in held):
            return None
        return self.k


def _calls(line: str) -> list[tuple[str, list[str], int, int]]:
    """The calls on `line` that close there, in order: their name, arguments' text, and where
    their parenthesised arguments start and end."""
    out = []
    for m in _CALL.finditer(line):
        if m.group(1) in NOT_CALLS:
            continue
        found = _arguments(line, m.end() - 1)
        if found is not None:
            spans, close = found
            out.append((m.group(1), [line[a:b] for a, b in spans], m.end() - 1, close))
    return out


def _argument_change(before: str, after: str) -> ArgumentChange | None:
    """The one call whose arguments changed by one argument between the lines before and after
    an edit, its other arguments and the rest of the lines unchanged."""
    old, new = _calls(before), _calls(after)
    if [c[0] for c in old] != [c[0] for c in new]:
        return None  # a call added, removed or renamed: not one call's arguments
    changes = [(o, n) for o, n in zip(old, new, strict=True) if o[1] != n[1]]
    if len(changes) != 1:
        return None
    (name, a, open_a, end_a), (_, b, open_b, end_b) = changes[0]
    if before[:open_a] != after[:open_b] or before[end_a:] != after[end_b:]:
        return None  # the lines changed outside the call too
    if abs(len(a) - len(b)) != 1:
        return None
    short, long = (a, b) if len(a) < len(b) else (b, a)
    k = next((i for i in range(len(short)) if short[i] != long[i]), len(short))
    if short != long[:k] + long[k + 1 :] or not long[k] or "\n" in long[k]:
        return None  # an empty argument is a trailing comma's, not one passed
    return ArgumentChange(name, len(a), k, long[k] if len(b) > len(a) else "", _keyword(long[k]))


def _changed_at(
    spans: list[tuple[int, int]], k: int, written: str, open_at: int, kind: str, score: float
) -> Suggestion:
    """The change that writes `written` as argument k of a call whose arguments are at `spans`
    (or, with `written` empty, removes argument k)."""
    if not written:
        a, b = spans[k]
        if k + 1 < len(spans):
            b = spans[k + 1][0]
        elif k > 0:
            a = spans[k - 1][1]
        return Suggestion(a, b, "", kind, score)
    if k < len(spans):
        at = spans[k][0]
        return Suggestion(at, at, f"{written}, ", kind, score)
    at = spans[-1][1] if spans else open_at + 1
    return Suggestion(at, at, f", {written}" if spans else written, kind, score)
