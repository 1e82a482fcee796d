"""The shape rules: the same change on lines of the same shape nearby, and a deleted line's twin.

* **shape**: the last edit's lines, read as line pairs (changed), deleted lines and inserted lines;
  the nearest block of as many lines whose changed lines have the same shape (names, numbers and
  strings abstracted) and hold the same changed tokens, and whose deleted lines are the same
  lines, gets the same change: each changed line its token change, the deleted lines go, the
  inserted ones come in at the block's indentation.
* **twin**: a whole line deleted whose exact twin stays nearby: the twin goes too. Sure only in a
  series (the same line deleted before); a lone deletion rarely has its twin follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from .history import Edit
from .suggestion import Suggestion
from .text import (
    Token,
    behind,
    changes,
    heading,
    is_name,
    line_of,
    lines_near,
    lines_of,
    opcodes,
    shape,
    tokens,
)

WINDOW_LINES = 60  # both rules look this far from the edit
MIN_TWIN_CHARS = 8  # a deleted line shorter than this ("}", "pass") has no meaningful twin


def reshaped(text: str, last: Edit, earlier: Sequence[Edit]) -> list[Suggestion]:
    """The last edit's change made again on the nearest block of lines of its shape."""
    was, now = last.lines_before.split("\n"), last.lines_after.split("\n")
    if len(was) > MAX_BLOCK_LINES or len(now) > MAX_BLOCK_LINES:
        return []
    plan = _plan(was, now)
    if plan is None:
        return []
    edited = lines_of(text, last)
    way = heading(last, earlier)
    found: list[tuple[bool, int, int, int, str]] = []  # (behind, distance, start, end, block)
    converted = 0
    starts = [a for a, _ in lines_near(text, edited[0], WINDOW_LINES)]
    lines = {a: text[a:b] for a, b in lines_near(text, edited[0], WINDOW_LINES + len(was))}
    order = sorted(lines)
    for a in starts:
        k = order.index(a)
        block = [lines[x] for x in order[k : k + len(was)]]
        first, last_start = order[k], order[min(k + len(was), len(order)) - 1]
        if len(block) < len(was) or (
            first < edited[1] and last_start + len(lines[last_start]) > edited[0]
        ):
            continue  # short at the window's end, or overlapping the edit
        pairs = [
            (block[i], was[i], now[j]) for i, (role, j) in enumerate(plan[0]) if role == "pair"
        ]
        if all(_transform(b, n, w) is not None for b, w, n in pairs):
            converted += 1  # a block that reads so already: a series under way
            continue
        out = _apply(plan, block, was, now)
        if out is not None and out != block:
            end = last_start + len(lines[last_start])
            distance = text.count("\n", min(first, edited[0]), max(first, edited[0]))
            found.append((behind(way, edited[0], first), distance, first, end, "\n".join(out)))
    if not found:
        return []
    _, distance, start, end, new_block = min(found)  # the nearest ahead first
    form = [shape(tokens(w)) for w in was]
    repeated = any(
        e.lines_before != last.lines_before
        and changes(e)
        and [shape(tokens(w)) for w in e.lines_before.split("\n")] == form
        for e in earlier
    )
    # The same change made before in this history, or lines that read as its result already:
    # a series under way (on the calibration histories such candidates were mostly right).
    score = 0.45 + 0.25 * (repeated or converted > 0) + 0.1 * (len(found) > 1)
    score -= 0.15 * min(distance / WINDOW_LINES, 1.0)
    return [Suggestion(start, end, new_block, "shape", round(min(score, 0.95), 4))]


MAX_BLOCK_LINES = 8

# A plan: for each line of the edit's old lines, what happens to it ("keep": context, "pair":
# changed into now[j], "drop": deleted), and the lines inserted after each old line.
Plan = tuple[list[tuple[str, int]], dict[int, list[int]]]


def _plan(was: Sequence[str], now: Sequence[str]) -> Plan | None:
    """How the old lines became the new ones, line by line; None when it is not line pairs,
    deletions and insertions with at least one changed line (pure deletions are the twin's)."""
    roles: list[tuple[str, int]] = [("keep", -1)] * len(was)
    inserted: dict[int, list[int]] = {}
    ops = SequenceMatcher(None, [w.strip() for w in was], [n.strip() for n in now], autojunk=False)
    paired = False
    for tag, i1, i2, j1, j2 in ops.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for d in range(i2 - i1):
                roles[i1 + d] = ("pair", j1 + d)
            paired = True
        elif tag == "replace":
            return None  # lines rewritten into a different number of lines
        if tag == "delete":
            for d in range(i1, i2):
                roles[d] = ("drop", -1)
        if tag == "insert":
            inserted.setdefault(i1 - 1, []).extend(range(j1, j2))
    return (roles, inserted) if paired else None


def _apply(
    plan: Plan, block: Sequence[str], was: Sequence[str], now: Sequence[str]
) -> list[str] | None:
    """The block changed as the plan says, or None when it does not hold what the plan
    changes."""
    roles, inserted = plan
    out: list[str] = []
    shared = False
    indent = _indent(block[0]) if block else ""
    base = _indent(was[0]) if was else ""
    for j in inserted.get(-1, []):
        out.append(_reindent(now[j], base, indent))
    for i, (role, j) in enumerate(roles):
        line = block[i]
        if role == "drop":
            if line.strip() != was[i].strip():
                return None
        elif role == "pair":
            new = _transform(line, was[i], now[j])
            if new is None:
                return None
            shared = shared or _shares_a_name(line, was[i])
            out.append(new)
        else:
            out.append(line)
        for k in inserted.get(i, []):
            out.append(_reindent(now[k], base, indent))
    return out if shared else None


def _transform(line: str, before: str, after: str) -> str | None:
    """`line` changed as `before` became `after`, token for token; None when line is not of
    before's shape or does not hold the changed tokens."""
    bt, at, lt = tokens(before), tokens(after), tokens(line)
    if len(bt) < 2 or len(lt) != len(bt) or shape(lt) != shape(bt):
        return None
    ops = [op for op in opcodes(bt, at) if op[0] != "equal"]
    if not ops or not all(_same(lt, bt, i1, i2) for _, i1, i2, _, _ in ops):
        return None
    out = line
    for _, i1, i2, j1, j2 in reversed(ops):
        a, b = _gap(lt, line, i1, i2)
        x, y = _gap(at, after, j1, j2)
        if i1 == 0 or j1 == 0:  # at the line's start: each line keeps its own indentation
            a, x = (lt[0].start if i1 == 0 else a), (at[0].start if j1 == 0 and at else x)
        out = out[:a] + after[x:y] + out[b:]
    return out


def _shares_a_name(line: str, before: str) -> bool:
    pairs = zip(tokens(line), tokens(before), strict=False)
    return any(is_name(b.text) and t.text == b.text for t, b in pairs)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _reindent(line: str, base: str, indent: str) -> str:
    return indent + line[len(base) :] if line.startswith(base) else line


def _same(toks: Sequence[Token], ref: Sequence[Token], i: int, j: int) -> bool:
    return [t.text for t in toks[i:j]] == [t.text for t in ref[i:j]]


def _gap(toks: Sequence[Token], line: str, i: int, j: int) -> tuple[int, int]:
    """The str span between token i-1's end and token j's start: tokens i..j-1 and the space
    around them (for an insertion, i == j, the space where it goes)."""
    a = toks[i - 1].end if i > 0 else 0
    b = toks[j].start if j < len(toks) else len(line)
    return a, b


def twin(text: str, last: Edit, earlier: Sequence[Edit]) -> list[Suggestion]:
    """A whole line deleted: its exact twin nearby goes too. Sure only when the same line was
    deleted before (a series of them); a lone deletion rarely has its twin follow."""
    if last.new.strip():
        return []
    was = [ln.strip() for ln in last.lines_before.split("\n")]
    now = [ln.strip() for ln in last.lines_after.split("\n")]
    gone = [ln for ln in was if ln]
    for ln in now:
        if ln in gone:
            gone.remove(ln)
        elif ln:
            return []  # a line changed, not only deleted
    if len(gone) != 1 or len(gone[0]) < MIN_TWIN_CHARS:
        return []
    at = last.start
    twins = [
        (a, b)
        for a, b in lines_near(text, line_of(text, at)[0], WINDOW_LINES)
        if text[a:b].strip() == gone[0]
    ]
    if not twins:
        return []
    a, b = min(twins, key=lambda s: abs(s[0] - at))
    end = b + 1 if b < len(text) else b
    again = any(
        not e.new.strip() and gone[0] in [ln.strip() for ln in e.old.split("\n")] for e in earlier
    )
    score = 0.8 if again else 0.35
    return [Suggestion(a, end, "", "twin", score)]
