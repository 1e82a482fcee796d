"""A `return` that its function's head rules out: what the compiler rejects and a parse does not.

The grammar parses `return err` anywhere, but Go rejects it in a function that returns
`(*T, error)`, as Java, C and C++ reject `return x;` in a `void` function and `return;` in one
that returns a value, and Rust `return;` where the head says `-> T`. On the calibration code the
Go drafts the gate was surest of and got wrong were mostly such returns (`return err` where the
line was `return nil, err`, `return` where it was `return m.ct`), copied from functions with
other results.

`Returns` reads the head of the innermost function around the insertion (the nearest less
indented function head above it, as blocks.py reads heads: one line of it) and says how many
values a `return` there may give; a line the insertion makes that is a `return` with any other
number is rejected. Only where the head says it plainly: a head over several lines, a closure or
lambda on the way up (`func() {`, `=>`, `|x|`, `[&](`), C++'s `auto`, or another language says
nothing, and everything passes.
"""

from __future__ import annotations

import re

from ..drafts.blocks import head_kind, is_comment
from ..lexer import group_end, parts

MAX_ROWS = 2000  # lines above the insertion read for the function's head
_RETURN = re.compile(r"return\b\s*(.*?)\s*;?\s*$")
_NAME = re.compile(r"[A-Za-z_]\w*")
_CLOSURE = re.compile(r"\bfunc\s*\(|=>|\|[^|]*\|\s*\{|\]\s*\(|->\s*\{|\bfunction\s*\(")
_COMMENTS = re.compile(r"/\*.*?\*/|//.*$")
_GO_UNNAMED = frozenset({"func", "chan", "map", "struct", "interface"})
_C_FAMILY = frozenset({"java", "c", "cpp"})


def _past(s: str, at: int = 0) -> int:
    """Past the bracket group that opens at s[at] (the end of s when it does not close)."""
    end = group_end(s, at)
    return len(s) if end is None else end


def _go(head: str) -> frozenset[int] | None:
    """The counts of values a Go function's `return` may give, from its head line."""
    rest = head.removeprefix("func").lstrip()
    if rest.startswith("("):  # a method's receiver
        rest = rest[_past(rest) :].lstrip()
    name = _NAME.match(rest)
    if name is None:
        return None
    rest = rest[name.end() :].lstrip()
    if rest.startswith("["):  # type parameters
        rest = rest[_past(rest) :].lstrip()
    if not rest.startswith("("):
        return None
    results = rest[_past(rest) :].strip().removesuffix("{").strip()
    if not results:
        return frozenset({0})
    if not results.startswith("("):
        return frozenset({1})
    inner = results[1 : _past(results) - 1]
    types = [inner[a:b].strip() for a, b in parts(inner)]
    named = any(len(t.split()) > 1 and t.split()[0] not in _GO_UNNAMED for t in types)
    return frozenset({0, len(types)}) if named else frozenset({len(types)})


def _c_family(head: str, language_id: str) -> frozenset[int] | None:
    """Java, C and C++: `void f(...)` returns nothing; a type before the name, one value; a
    constructor (Java's with no type, C++'s `A::A`) nothing; C++'s `auto`, not known."""
    before = head.split("(", 1)[0]
    if "::~" in before or re.search(r"\b(\w+)::\1\s*$", before):  # C++'s own ctor, dtor
        return frozenset({0})
    words = [w for w in _NAME.findall(before) if w not in ("public", "private", "protected")]
    words = [w for w in words if w not in ("static", "final", "inline", "virtual", "extern")]
    if "auto" in words or "operator" in before:
        return None
    if "void" in words and not re.search(r"\bvoid\s*\*", before):
        return frozenset({0})
    if len(words) > 1:
        return frozenset({1})
    # No type before the name: Java's constructor; in C and C++ the type may stand on the line
    # above (`static int\nparse(const char *s) {`), so not known.
    return frozenset({0}) if language_id == "java" else None


def _counts(head: str, language_id: str) -> frozenset[int] | None:
    if language_id == "go" and head.startswith("func"):
        return _go(head)
    if language_id == "rust" and re.match(r"(?:pub(?:\([\w:]+\))?\s+)?(?:\w+\s+)*fn\b", head):
        params_end = _past(head, head.find("(")) if "(" in head else len(head)
        return frozenset({1}) if "->" in head[params_end:] else frozenset({0})
    if language_id in _C_FAMILY:
        return _c_family(head, language_id)
    if language_id in ("typescript", "typescriptreact") and re.search(r"\)\s*:\s*void\s*\{$", head):
        return frozenset({0})
    return None


def _values(line: str, language_id: str) -> int | None:
    """How many values a `return` line gives (None: the line is no return)."""
    m = _RETURN.fullmatch(_COMMENTS.sub("", line).strip())
    if m is None:
        return None
    value = m.group(1)
    if not value:
        return 0
    return len(parts(value)) if language_id == "go" else 1


class Returns:
    """What the function around the insertion point (the end of `before`) lets a `return`
    give: `allows(line)` for the line the insertion makes."""

    def __init__(self, before: str, language_id: str) -> None:
        self.language_id = language_id
        self.counts = self._find(before)

    def _find(self, before: str) -> frozenset[int] | None:
        lines = before.split("\n")
        line = lines[-1]
        depth = len(line) - len(line.lstrip(" \t"))
        for above in reversed(lines[-MAX_ROWS:-1]):
            s = above.strip()
            d = len(above) - len(above.lstrip(" \t"))
            if not s or d >= depth or is_comment(s):
                continue
            depth = d
            if head_kind(s) == "function":
                return _counts(s, self.language_id) if s.endswith("{") else None
            if _CLOSURE.search(s) or s[0] in ")]}":
                return None
        return None

    def allows(self, line: str) -> bool:
        if self.counts is None:
            return True
        n = _values(line, self.language_id)
        return n is None or n in self.counts
