"""Body drafts: several lines for a block whose body is still empty, taken from where the same
opener line stands elsewhere with a body under it.

The cursor sits indented under an opener (a line ending with `:` or `{`) and the line below is
not indented under it: the block's body is what is missing. Wherever else the same opener line
stands, its body (the lines indented under it, 2 to MAX_BODY_LINES of them; a one-line body is
a line draft already) is a draft, re-indented to the cursor. It is scored as a line draft is
(weights.Weights: the same line above, the same line after the body as below the cursor, words
around, the indentation step, recurrence, the names the document knows), so the two kinds rank
together.

On held-out repositories such a body stands elsewhere after the same opener for 0.2-6.5 % of
block and function bodies (docs/drafts.md): rarely, but then it is the whole body, which the
builtin model never writes.

A body fits its function: under a function's opener (`def charge(user_id, amount):`,
`func (s *Server) Get(id int) {`) a body that names none of its parameters (`raise
ValueError("user_id is required")` under another function: a name in a string does not count) is
no draft (`names_a_parameter`). The parameters are the names inside the opener line's
parentheses, `self`, `cls`, `this` and a few keywords left out; a function without any, or an
opener whose parameters stand on lines above it, has no such rule. A body whose source block is
a function's while the cursor's is not (lines.fits_scope) is none either.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import fields, replace

from .blocks import CONTROL
from .draft import Draft
from .idents import IDENT, jaccard
from .lines import Cursor, LineIndex, fits_scope, indent_of
from .weights import WEIGHTS, Weights, score

MAX_BODY_LINES = 12  # non-blank lines of a body drafted whole
MAX_OPENERS = 64  # occurrences of the opener line looked at, per index
# where recurrence stands among the features (weights.Weights' order)
RECUR = [f.name for f in fields(Weights)].index("recur")
# Inside a signature's parentheses, names that are no parameter a body would use.
_NOT_PARAMETERS = frozenset({"self", "cls", "this", "mut", "const", "final", "ref", "in", "out"})
_STRING = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|`[^`]*`")


def empty_body(cur: Cursor) -> bool:
    """Whether the cursor is on the empty body of the block its line above opens."""
    return (
        not cur.typed
        and not cur.rest
        and cur.prev.endswith((":", "{"))
        and cur.step > 0
        and cur.next_indent <= len(cur.indent) - cur.step
    )


def parameters(opener: str) -> frozenset[str]:
    """The parameter names of a function's opener line (see the module's docstring); none for
    an opener that is no function's (`if f(x):`, `for (...) {`, `class A(B):`)."""
    line = opener.lstrip("}) \t")
    first = IDENT.match(line)
    if first is None or first.group() in CONTROL or "(" not in line:
        return frozenset()
    if line.endswith(":") and not line.startswith(("def ", "async def ")):
        return frozenset()  # an indented language's block: only `def` has parameters
    names: set[str] = set()
    depth = 0
    for m in re.finditer(r"[()]|[A-Za-z_][A-Za-z0-9_]*", line):
        token = m.group()
        if token in "()":
            depth += 1 if token == "(" else -1
        elif depth > 0:
            names.add(token)
    return frozenset(names - _NOT_PARAMETERS)


def names_a_parameter(body: str, opener: str) -> bool:
    """Whether a body names one of its opener's parameters outside its strings (True where the
    opener has none)."""
    params = parameters(opener)
    return not params or bool(params & set(IDENT.findall(_STRING.sub('""', body))))


def body_at(index: LineIndex, row: int) -> list[str] | None:
    """The body under the opener at `row`: its lines (trailing blank lines left out), when it
    has 2 to MAX_BODY_LINES non-blank ones."""
    depth = len(indent_of(index.lines[row]))
    lines: list[str] = []
    r = row + 1
    while r < len(index.lines):
        line = index.lines[r]
        if line.strip() and len(indent_of(line)) <= depth:
            break
        lines.append(line)
        r += 1
    while lines and not lines[-1].strip():
        lines.pop()
    n = sum(1 for line in lines if line.strip())
    return lines if 2 <= n <= MAX_BODY_LINES else None


def reindent(lines: list[str], indent: str, unit: str, step: int) -> str:
    """The body as it would read at the cursor: its first line where the cursor is (already
    indented), the others at `indent` plus their depth under the first, in levels of the
    document's `unit` (a tab, or so many spaces) where the body's own file indents by `step`
    characters: a body from a 4-space file reads in tabs in a tab-indented one."""
    base = len(indent_of(lines[0]))
    out = [lines[0].strip()]
    for line in lines[1:]:
        if not line.strip():
            out.append("")
            continue
        depth = len(indent_of(line))
        if depth < base:
            return ""  # a body that dedents past its first line is not one block
        levels, rest = divmod(depth - base, max(step, 1))
        out.append(indent + unit * levels + " " * rest + line.strip())
    return "\n".join(out)


def bodies(
    cur: Cursor, indices: Sequence[LineIndex], limit: int = 8, weights: Weights = WEIGHTS
) -> list[Draft]:
    """The best `limit` distinct bodies for a cursor on an empty body, best first."""
    if not empty_body(cur):
        return []
    unit = "\t" if "\t" in cur.indent else " " * cur.step  # the document's level, at the cursor
    found: dict[str, tuple[float, Draft]] = {}
    counts: dict[str, int] = {}
    for index in indices:
        for row in index.by_text.get(cur.prev, ())[:MAX_OPENERS]:
            lines = body_at(index, row)
            if lines is None:
                continue
            step = len(indent_of(lines[0])) - len(indent_of(index.lines[row]))
            text = reindent(lines, cur.indent, unit, step)
            if not text or not names_a_parameter(text, cur.prev):
                continue
            if not fits_scope(cur, index, row + 1):
                continue
            counts[text] = counts.get(text, 0) + 1
            after = index.neighbour(row + len(lines), 1)
            names = set(IDENT.findall(text))
            features = (
                1.0,  # the opener is the line above
                float(bool(cur.prev2) and index.neighbour(row, -1) == cur.prev2),
                float(bool(cur.next) and after == cur.next),
                jaccard(index.window(row), cur.around),
                float(step == cur.step),
                0.0,  # recurrence: added below, once every occurrence is counted
                len(names & cur.known) / len(names) if names else 1.0,
                float(index.source == "document"),
                0.0,
                0.0,
                1.0,
            )
            value = score(features, weights)
            if text not in found or value > found[text][0]:
                at = row + index.offset + 2
                where = f"{index.path}:{at}" if index.path else f"line {at}"
                found[text] = (value, Draft(text, index.source, value, where, features))
    out = []
    for text, (value, draft) in found.items():
        recur = math.log(counts[text])
        value += weights.recur * recur
        with_recur = (*draft.features[:RECUR], recur, *draft.features[RECUR + 1 :])
        out.append(replace(draft, score=value, features=with_recur, votes=counts[text]))
    return sorted(out, key=lambda d: -d.score)[:limit]
