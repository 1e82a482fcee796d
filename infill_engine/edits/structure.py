"""Next-edit candidates from structure, no model: what the last edit implies elsewhere.

The last edit (history.py) is read as a change of tokens on its lines, and each rule proposes
where the same intent goes on:

* **rename**: one name replaced by another (every change on the lines the same mapping): the
  nearest other reference of the old name, in the scope of its binding when the tree says the
  edit renamed a parameter or a local (tree-sitter), else in the file. Sure when the edit was at
  a binding, or the same mapping was made before; unsure when the new name was already in use
  there (that is a changed argument, not a rename).
* **signature**: a parameter removed or added in a definition: the nearest call of that name with
  the old number of arguments loses that argument, or gets the parameter's name in its place.
* **shape**: one line changed, and a line nearby has the same shape (the same tokens, names and
  numbers abstracted) and holds the same changed tokens: the same change there.
* **twin**: a line deleted whose exact twin stays in the file: the twin goes too.

Each candidate's score (0..1) is the rule's confidence, read by the gate (suggestion.py), whose
thresholds are fitted on replayed histories. Every rule reads a bounded window of the document,
so a request stays in milliseconds on large files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from difflib import SequenceMatcher
from typing import Any

from .history import Edit
from .suggestion import Suggestion
from .tokens import Token, is_name, shape, tokens

WINDOW_LINES = 60  # shape and twin rules look this far from the edit
MAX_SCAN_CHARS = 400_000  # references and calls are looked for within this of the edit
MIN_TWIN_CHARS = 8  # a deleted line shorter than this ("}", "pass") has no meaningful twin

_SCOPES = ("function", "method", "lambda", "closure", "constructor")


def candidates(
    text: str, edits: Sequence[Edit], language_id: str, cursor: int, tree: Any | None = None
) -> list[Suggestion]:
    """Every structural candidate after the last of `edits`, best first (empty without one)."""
    if not edits:
        return []
    last = edits[-1]
    if last.clipped or last.end > len(text) or text[last.start : last.end] != last.new:
        return []  # the history does not describe this text (a missed change): say nothing
    found: list[Suggestion] = []
    before, after = tokens(last.lines_before), tokens(last.lines_after)
    ops = [op for op in _opcodes(before, after) if op[0] != "equal"]
    mapping = _renamed(ops, before, after)
    if mapping is not None:
        found += _rename(text, last, mapping, edits[:-1], tree)
        found += _signature(text, last, before, after, tree)
    elif ops:
        found += _signature(text, last, before, after, tree)
        found += _shape(text, last, before, after, edits[:-1])
    found += _twin(text, last)
    return sorted(found, key=lambda s: -s.score)


def _opcodes(a: Sequence[Token], b: Sequence[Token]) -> list[tuple[str, int, int, int, int]]:
    return list(
        SequenceMatcher(
            None, [t.text for t in a], [t.text for t in b], autojunk=False
        ).get_opcodes()
    )


def _renamed(
    ops: Sequence[tuple[str, int, int, int, int]], before: Sequence[Token], after: Sequence[Token]
) -> tuple[str, str] | None:
    """(old, new) when every change is one name replaced by another, the same each time."""
    pairs = set()
    for tag, i1, i2, j1, j2 in ops:
        if tag != "replace" or i2 - i1 != 1 or j2 - j1 != 1:
            return None
        old, new = before[i1].text, after[j1].text
        if not (is_name(old) and is_name(new)):
            return None
        pairs.add((old, new))
    return pairs.pop() if len(pairs) == 1 else None


def _words(text: str, name: str, lo: int, hi: int) -> Iterator[re.Match[str]]:
    return re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])").finditer(text, lo, hi)


def _line_of(text: str, offset: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return start, len(text) if end < 0 else end


def _rename(
    text: str, last: Edit, mapping: tuple[str, str], earlier: Sequence[Edit], tree: Any | None
) -> list[Suggestion]:
    old, new = mapping
    at = last.start + last.new.find(new) if new in last.new else last.start
    binding, scope = _binding(text, at, tree)
    lo, hi = scope if scope is not None else (max(0, at - MAX_SCAN_CHARS), at + MAX_SCAN_CHARS)
    edited = _line_of(text, last.start)[0], _line_of(text, last.end)[1]
    refs = [m for m in _words(text, old, lo, hi) if not edited[0] <= m.start() < edited[1]]
    if not refs:
        return []
    again = any(
        _renamed(_changes(e), tokens(e.lines_before), tokens(e.lines_after)) == mapping
        for e in earlier
    )
    in_use = any(True for m in _words(text, new, lo, hi) if not edited[0] <= m.start() < edited[1])
    if again or binding:
        score = 0.9
    elif in_use:
        score = 0.2  # the new name was there already: an argument changed, not a name
    else:
        score = 0.55
    nearest = min(refs, key=lambda m: abs(m.start() - at))
    line = _line_of(text, nearest.start())
    same = [m for m in refs if line[0] <= m.start() < line[1]]
    start, end = same[0].start(), same[-1].end()
    piece = re.sub(rf"(?<![\w$]){re.escape(old)}(?![\w$])", new, text[start:end])
    far = abs(text.count("\n", min(at, start), max(at, start)))
    score -= 0.1 * min(far / 200, 1.0)
    return [Suggestion(start, end, piece, "rename", round(max(score, 0.0), 4))]


def _changes(edit: Edit) -> list[tuple[str, int, int, int, int]]:
    return [
        op
        for op in _opcodes(tokens(edit.lines_before), tokens(edit.lines_after))
        if op[0] != "equal"
    ]


def _binding(text: str, offset: int, tree: Any | None) -> tuple[bool, tuple[int, int] | None]:
    """(whether the name at offset is bound there, the str span of the scope a parameter or a
    local binding lives in); (False, None) without a tree."""
    if tree is None:
        return False, None
    data_prefix = len(text[:offset].encode("utf-8"))
    node = tree.root_node.descendant_for_byte_range(data_prefix, data_prefix)
    if node is None:
        return False, None
    bound, chain, n = False, list[Any](), node
    while n is not None and len(chain) < 6:
        chain.append(n)
        n = n.parent
    for depth, anc in enumerate(chain[1:4], start=1):
        child = chain[depth - 1]
        if "parameter" in anc.type:
            bound = True
            break
        for field in ("name", "left", "pattern", "declarator"):
            f = anc.child_by_field_name(field)
            if f is not None and f.start_byte <= child.start_byte and child.end_byte <= f.end_byte:
                bound = True
                break
        if bound:
            break
    if not bound:
        return False, None
    scope = node.parent
    while scope is not None and not _is_scope(scope.type):
        scope = scope.parent
    if scope is None:
        return True, None
    named = scope.child_by_field_name("name")
    if named is not None and named.start_byte <= node.start_byte < named.end_byte:
        return True, None  # the function's own name: its references are outside it
    data = text.encode("utf-8")
    return True, (len(data[: scope.start_byte].decode("utf-8", "replace")),
                  len(data[: scope.end_byte].decode("utf-8", "replace")))  # fmt: skip


def _is_scope(kind: str) -> bool:
    """A function-like node (not its declarator or its parameters)."""
    return any(k in kind for k in _SCOPES) and not any(k in kind for k in ("declarator", "param"))


def _signature(
    text: str, last: Edit, before: Sequence[Token], after: Sequence[Token], tree: Any | None
) -> list[Suggestion]:
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
    edited = _line_of(text, last.start)[0], _line_of(text, last.end)[1]
    best: Suggestion | None = None
    for m in _words(text, name, max(0, last.start - MAX_SCAN_CHARS), last.start + MAX_SCAN_CHARS):
        if edited[0] <= m.start() < edited[1] or not text.startswith("(", m.end()):
            continue
        args = _arguments(text, m.end())
        if args is None or len(args) != len(old_params):
            continue
        spans = args
        if removed:
            a, b = spans[k]
            if k + 1 < len(spans):
                b = spans[k + 1][0]
            elif k > 0:
                a = spans[k - 1][1]
            sug = Suggestion(a, b, "", "signature", 0.75)
        else:
            assert arg_name is not None
            word = arg_name.group(0)
            if k < len(spans):
                at = spans[k][0]
                sug = Suggestion(at, at, f"{word}, ", "signature", 0.55)
            else:
                at = spans[-1][1] if spans else m.end() + 1
                sug = Suggestion(at, at, f", {word}" if spans else word, "signature", 0.55)
        if best is None or abs(sug.start - last.start) < abs(best.start - last.start):
            best = sug
    return [best] if best is not None else []


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


def _arguments(text: str, open_at: int) -> list[tuple[int, int]] | None:
    """The str spans of a call's arguments (stripped) from its "(" at open_at; None when it
    does not close within a few lines' worth of text."""
    depth, spans, start, quote = 0, [], open_at + 1, ""
    for i in range(open_at, min(len(text), open_at + 2000)):
        ch = text[i]
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
            continue
        if ch in "\"'`":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                spans.append((start, i))
                break
        elif ch == "," and depth == 1:
            spans.append((start, i))
            start = i + 1
    else:
        return None
    out = []
    for a, b in spans:
        piece = text[a:b]
        lead = len(piece) - len(piece.lstrip())
        out.append((a + lead, a + len(piece.rstrip())))
    return [] if out == [(open_at + 1, open_at + 1)] else out


def _shape(
    text: str, last: Edit, before: Sequence[Token], after: Sequence[Token], earlier: Sequence[Edit]
) -> list[Suggestion]:
    """The same token change on the nearest line of the same shape that holds the changed
    tokens and shares a name with the edited line at the same place."""
    if "\n" in last.lines_before.strip("\n") or "\n" in last.lines_after.strip("\n"):
        return []  # one line to one line
    if len(before) < 2 or not after:
        return []  # a deletion is the twin rule's
    ops = [op for op in _opcodes(before, after) if op[0] != "equal"]
    form, done = shape(before), shape(after)
    edited = _line_of(text, last.start)
    found: list[tuple[int, int, int, str]] = []  # (distance, start, end, new line)
    converted = 0
    for line_start, line_end in _lines_near(text, edited[0], WINDOW_LINES):
        line = text[line_start:line_end]
        toks = tokens(line)
        if shape(toks) == done and all(_same(toks, after, j1, j2) for _, _, _, j1, j2 in ops):
            converted += 1  # a line changed the same way already: a series under way
            continue
        if shape(toks) != form or not all(_same(toks, before, i1, i2) for _, i1, i2, _, _ in ops):
            continue
        if not any(is_name(b.text) and t.text == b.text for t, b in zip(toks, before, strict=True)):
            continue  # nothing but the shape in common
        new_line = line
        for _, i1, i2, j1, j2 in reversed(ops):
            a, b = _gap(toks, line, i1, i2)
            x, y = _gap(after, last.lines_after, j1, j2)
            new_line = new_line[:a] + last.lines_after[x:y] + new_line[b:]
        if new_line != line:
            distance = text.count("\n", min(line_start, edited[0]), max(line_start, edited[0]))
            found.append((distance, line_start, line_end, new_line))
    if not found:
        return []
    distance, start, end, new_line = min(found)
    repeated = any(
        e.lines_before != last.lines_before
        and _changes(e)
        and shape(tokens(e.lines_before)) == form
        for e in earlier
    )
    score = 0.45 + 0.25 * (repeated or converted > 0) + 0.1 * (len(found) > 1)
    score -= 0.15 * min(distance / WINDOW_LINES, 1.0)
    return [Suggestion(start, end, new_line, "shape", round(min(score, 0.95), 4))]


def _same(toks: Sequence[Token], ref: Sequence[Token], i: int, j: int) -> bool:
    return [t.text for t in toks[i:j]] == [t.text for t in ref[i:j]]


def _gap(toks: Sequence[Token], line: str, i: int, j: int) -> tuple[int, int]:
    """The str span between token i-1's end and token j's start: tokens i..j-1 and the space
    around them (for an insertion, i == j, the space where it goes)."""
    a = toks[i - 1].end if i > 0 else 0
    b = toks[j].start if j < len(toks) else len(line)
    return a, b


def _lines_near(text: str, at: int, n: int) -> Iterator[tuple[int, int]]:
    """The spans of up to n lines before and n after the line starting at `at`, nearest first
    is not promised (the caller sorts)."""
    lo = at
    for _ in range(n):
        if lo == 0:
            break
        lo = text.rfind("\n", 0, lo - 1) + 1
    end = text.find("\n", at)
    hi = end
    for _ in range(n):
        if hi < 0:
            break
        hi = text.find("\n", hi + 1)
    hi = len(text) if hi < 0 else hi
    pos = lo
    while pos <= hi:
        e = text.find("\n", pos)
        e = len(text) if e < 0 else e
        if pos != at:
            yield pos, e
        if e >= len(text):
            break
        pos = e + 1


def _twin(text: str, last: Edit) -> list[Suggestion]:
    """A whole line deleted: its exact twin nearby goes too."""
    if last.new.strip():
        return []
    was = [ln.strip() for ln in last.lines_before.split("\n")]
    now = [ln.strip() for ln in last.lines_after.split("\n")]
    gone = [ln for ln in was if ln]
    for ln in now:
        if ln in gone:
            gone.remove(ln)
    if len(gone) != 1 or len(gone[0]) < MIN_TWIN_CHARS:
        return []
    at = last.start
    twins = [
        (a, b)
        for a, b in _lines_near(text, _line_of(text, at)[0], WINDOW_LINES)
        if text[a:b].strip() == gone[0]
    ]
    if not twins:
        return []
    a, b = min(twins, key=lambda s: abs(s[0] - at))
    end = b + 1 if b < len(text) else b
    score = 0.7 if len(twins) <= 2 else 0.5
    return [Suggestion(a, end, "", "twin", score)]
