"""Which block a line stands in, read from indentation and head lines alone (no grammar, so in
every language): whether it is in a function (under `def`, `fn`, `func`, `function`, a brace
head with parentheses such as `int f(int x) {` or `(a) => {`) or not (the module level, a class
body, a module-level `if`). Line and body drafts (lines.fits_scope, bodies.py) read it: a
function's statement (`return ...`, `self.total += x`) does not stand outside one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
COMMENT_STARTS = ("#", "//", "/*")  # a line starting so is a comment: it opens no block


def is_comment(stripped: str) -> bool:
    """Whether a stripped line is a comment: it starts with `#`, `//` or `/*`, or it is a block
    comment's inner line: stars, then a space, a slash or nothing (`* @param`, `*/`). Stars
    and then code are C's dereference (`*p = x;`) or a generator method (`*walk(node) {`)."""
    if stripped.startswith("*"):
        rest = stripped.lstrip("*")
        return not rest or rest[0] in " \t/"
    return stripped.startswith(COMMENT_STARTS)


_FUNCTION_HEAD = re.compile(
    r"(?:(?:pub(?:\([\w:]+\))?|export|default|async|static|public|private|protected|unsafe)\s+)*"
    r"(?:def|fn|func|function)\b"
)
_CLASS_HEAD = re.compile(
    r"(?:(?:pub(?:\([\w:]+\))?|export|default|abstract|final|public|private|protected|static)\s+)*"
    r"(?:class|struct|impl|interface|trait|enum|union|namespace|object)\b"
)
# The first words of heads with parentheses that open no function.
CONTROL = frozenset(
    {"if", "elif", "else", "for", "foreach", "while", "switch", "catch", "except", "do", "try"}
    | {"lock", "using", "synchronized", "with", "when", "match", "return"}
)


def head_kind(stripped: str) -> str:
    """The kind of block a head line opens: "function", "class", or "" (a control block, or no
    head)."""
    if _FUNCTION_HEAD.match(stripped):
        return "function"
    if _CLASS_HEAD.match(stripped):
        return "class"
    first = _NAME.match(stripped.lstrip("*"))  # `*walk(node) {`: a generator method
    if (
        stripped.endswith("{")
        and "(" in stripped
        and first is not None
        and first.group() not in CONTROL
        and "=" not in stripped.split("(", 1)[0]  # `x = f(a) {` is no head; `= (a) => {` is
    ):
        return "function"
    if stripped.endswith("=> {"):
        return "function"
    return ""


def in_functions(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it stands in a function (`walk`)."""
    return [inside for inside, _ in walk(lines)]


def owners(lines: Sequence[str]) -> list[int]:
    """For each line, the first row of the head of the outermost function it stands in (its
    own for a head at the module level), or -1 outside every function (`walk`)."""
    return [owner for _, owner in walk(lines)]


def walk(lines: Sequence[str]) -> list[tuple[bool, int]]:
    """For each line: whether it stands in a function (the innermost head among the less
    indented lines above it is a function's, not a class's; none: the module level), and the
    first row of the outermost function's head around it (its own for a function head at the
    module level; -1 outside every function). One pass, with a stack of the heads open at each
    depth. A line that starts with a closing bracket (`) -> int:`, `} else {`,
    `): T => {`) continues the head at its own depth, and makes it a function's where it
    ends as one; comments and blank lines take their neighbours' answer and open nothing."""
    out: list[tuple[bool, int]] = []
    # (depth, whether the lines under it are in a function, outermost function's row, row)
    stack: list[tuple[int, bool, int, int]] = []
    for i, line in enumerate(lines):
        s = line.strip()
        if not s or is_comment(s):
            out.append((stack[-1][1], stack[-1][2]) if stack else (False, -1))
            continue
        d = len(line) - len(line.lstrip(" \t"))
        closer = s[0] in ")]}"
        while stack and (stack[-1][0] > d or (stack[-1][0] == d and not closer)):
            stack.pop()
        if closer and stack and stack[-1][0] == d:  # the head above goes on
            _, under, owner, row = stack.pop()
            outer = stack[-1][2] if stack else -1
            if not under and head_kind(s) == "function":  # `export const f = (` ... `) => {`
                under, owner = True, outer if outer >= 0 else row
            out.append((stack[-1][1] if stack else False, owner))
            stack.append((d, under, owner, row))
            continue
        inside, outer = (stack[-1][1], stack[-1][2]) if stack else (False, -1)
        kind = head_kind(s)
        owner = outer if outer >= 0 or kind != "function" else i
        out.append((inside, owner))
        stack.append((d, kind == "function" if kind else inside, owner, i))
    return out
