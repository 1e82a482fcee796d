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
COMMENT_STARTS = ("#", "//", "*", "/*")  # a line starting so is a comment: it opens no block
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
    first = _NAME.match(stripped)
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
    """For each line, whether it stands in a function: the innermost head among the less
    indented lines above it is a function's (not a class's; none: the module level). One pass,
    with a stack of the heads open at each depth. A line that starts with a closing bracket
    (`) -> int:`, `} else {`) continues the head at its own depth; comments and blank lines
    take their neighbours' answer and open nothing."""
    out: list[bool] = []
    stack: list[tuple[int, bool]] = []  # (depth, whether the lines under it are in a function)
    for line in lines:
        s = line.strip()
        if not s or s.startswith(COMMENT_STARTS):
            out.append(stack[-1][1] if stack else False)
            continue
        d = len(line) - len(line.lstrip(" \t"))
        closer = s[0] in ")]}"
        while stack and (stack[-1][0] > d or (stack[-1][0] == d and not closer)):
            stack.pop()
        inside = stack[-1][1] if stack else False
        if closer and stack and stack[-1][0] == d:
            inside = stack[-2][1] if len(stack) > 1 else False
        out.append(inside)
        if not (closer and stack and stack[-1][0] == d):
            kind = head_kind(s)
            stack.append((d, kind == "function" if kind else inside))
    return out
