"""Names that belong to another function: a line draft copied from one function into another
often reads a variable the cursor's function never had.

On the calibration code, a good share of the line drafts the gate showed wrongly were a
sibling function's line whose names were that function's own: `append(r.middlewares, fn)`
drafted into `Use(mwf ...)`, `range(i)` where only `count` is bound, `obj, key, default` where
the function calls it `k`. The true line names what its own function binds. So a draft is
dropped when it reads a *stranger* (`strangers`): a name that another function of the document
binds (in its head, or in a line that binds it: `binds`), that neither the cursor's function nor
the module level ever mentions, and that no more than `MAX_FUNCTIONS` functions mention at all
(a name in many functions is a type, a builtin or a convention such as `err` or `ctx`, not one
function's own). Python's scoping is plainer: a bare name a function reads is its own, its
module's or a builtin, so there a name is a stranger however many other functions bind it
(on the standard-library calibration holes: shown right 61 of 104 -> 63 of 103).

Functions are read as blocks.py reads them, from indentation and head lines alone (so in every
language): a function is its head line and the lines under it, up to the first line at the
head's depth or less that does not close a bracket; a function inside another belongs to the
outermost one, which sees them all. What a draft reads (`reads`): its names but those after a
`.` (members), those before a `(` (calls: functions are the module's), and those it binds
itself (left of an assignment, loop and `as` targets, lambda parameters). Text with no
function in it has no strangers.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Set

from .blocks import owners
from .idents import IDENT, KEYWORDS

MAX_FUNCTIONS = 2  # a name mentioned in more functions than this is nobody's own
_ASSIGN = re.compile(r"(?<![=!<>:+\-*/%&|^~.])(?::=|=)(?![=>])")
_PARENS = re.compile(r"\(([^()]*)\)")
_IMPORTS = ("import ", "from ", "use ", "using ", "#include", "package ", "extern crate ")
# Names a line binds without an assignment: loop targets (`for k, v in`, `for (const x of`,
# `for i := range`), `as` targets (`except E as e`, `with f() as fh`), lambda parameters.
_LOOP = re.compile(
    r"\bfor\s*\(?\s*((?:(?:const|let|var|mut)\s+)?[\w\s,&*()]*?)\s*(?:\bin\b|\bof\b|:=|:)"
)
_AS = re.compile(r"\bas\s+([A-Za-z_]\w*)")
_LAMBDA = re.compile(r"\blambda\b([^:]*):")


def binds(line: str) -> set[str]:
    """The names a line binds: on the left of its first assignment (`x = ...`, `a, b := ...`,
    `let total = ...`, `int count = 0;`), each comma-separated target's last name, but members
    and items (`self.x`, `a[i]`) and whatever stands inside a call (`f(a=1)`); and its loop
    targets, `as` targets and lambda parameters (`for k, v in`, `except E as e`)."""
    out = set(_AS.findall(line))
    for found in (*_LOOP.finditer(line), *_LAMBDA.finditer(line)):
        out |= set(IDENT.findall(found.group(1))) - KEYWORDS
    m = _ASSIGN.search(line)
    if m is None:
        return out
    left = line[: m.start()]
    if "(" in left:
        return out
    for part in left.split(","):
        names = IDENT.findall(part.split(":")[0])  # `x: int = 0` binds x
        if names and "." not in part and "[" not in part:
            out.add(names[-1])
    return out


def parameters(head: str) -> set[str]:
    """The names inside a head line's parentheses: its parameters, but capitalised names
    (types, in most languages) and packages (`context.Context`)."""
    out = set()
    for group in _PARENS.findall(head):
        for m in IDENT.finditer(group):
            if not m.group()[0].isupper() and not group[m.end() :].startswith("."):
                out.add(m.group())
    return out


def reads(line: str) -> set[str]:
    """The names a line reads: neither members (after `.`), nor calls (before `(`), nor what it
    binds itself, nor the language's words. An import reads nothing: it binds its names."""
    if line.lstrip().startswith(_IMPORTS):
        return set()
    out = set()
    for m in IDENT.finditer(line):
        before = line[: m.start()].rstrip()
        after = line[m.end() :].lstrip()
        if before.endswith(".") or after.startswith("("):
            continue
        out.add(m.group())
    return out - binds(line) - KEYWORDS - {"_"}


def strangers(text: str, offset: int, names: Set[str], python: bool = False) -> frozenset[str]:
    """Those of `names` that belong to functions other than the one around `offset` (the
    module level's, if none is): see the module's docstring. The cursor's line counts as what
    is typed on it before the cursor. Only the lines that hold one of `names` are read, so a
    long document costs a request little more than its functions' outline. In Python
    (`python`) a name is a stranger however many other functions mention it: a bare name a
    function reads is its own, its module's or a builtin, never another function's."""
    names = set(names) - KEYWORDS
    if not names:
        return frozenset()
    lines = text.split("\n")
    starts = list(itertools.accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
    row = text.count("\n", 0, offset)
    typed = lines[row][: offset - starts[row]]
    own = owners([*lines[:row], typed + "_", *lines[row + 1 :]])  # its indentation decides
    mine = own[row]
    out = set()
    for name in names:
        found = re.finditer(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text)
        rows = {bisect.bisect_right(starts, m.start()) - 1 for m in found} - {row}
        if any(own[r] < 0 or own[r] == mine for r in rows):
            continue  # the cursor's function or the module mentions it
        if not python and len({own[r] for r in rows}) > MAX_FUNCTIONS:
            continue  # many functions': nobody's own
        if any(name in (parameters(lines[r]) if r == own[r] else binds(lines[r])) for r in rows):
            out.add(name)
    return frozenset(out)
