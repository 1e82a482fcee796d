"""Line drafts: lines found elsewhere in the code whose surroundings resemble the cursor's, and
continuations of the words before the cursor found inside other lines.

Code repeats itself: in real packages a fifth to a third of the one-line statements in function
bodies stand verbatim somewhere else in the same package. A line is a good draft for the cursor
when the lines around it match the lines around the cursor (the same line above, the same line
below, words in common nearby), when it sits at the cursor's indentation relative to the line
above, when it starts with what is already typed on the cursor's line, when its names are known
in the document, and when it recurs.

A line fits the block it lands in (`fits_scope`, blocks.py): one that stands in a function is
no draft where the cursor is not in one (`return ...` at module level or in a class body).

`Cursor` is what the cursor's place says (its indentation, what is typed, the lines around it);
`LineIndex` holds one text's lines with lookups by line and by neighbour; `candidates` scores
every line of the indices that could stand at the cursor and returns the best distinct texts.
Pure text, no model: the engine and the language server's workspace index both call it.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .blocks import in_functions
from .draft import Draft
from .idents import IDENT, jaccard
from .imports import imported_names, imports_and_uses, is_python
from .weights import WEIGHTS, Weights, score

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|[^\sA-Za-z0-9_]")
WINDOW = 4  # lines each side whose words are compared
MAX_LINE_CHARS = 200  # longer lines are data, not statements worth drafting
MAX_OCCURRENCES = 64  # occurrences of one line text scored (the rest only count)
MAX_DOCUMENT_ROWS = 5000  # a document up to this long has every line scored
MAX_PREFIXED = 256  # lines elsewhere that start with what is typed (or hold its tail), scored
NGRAM = 3  # words at the end of what is typed that n-gram lookup matches
MAX_SCOPE_ROWS = 2000  # lines above the cursor read for the head of its block


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def typed_before(text: str, offset: int) -> str:
    """What is typed on the cursor's line before it, after the indentation."""
    return text[text.rfind("\n", 0, offset) + 1 : offset].lstrip(" \t")


@dataclass
class LineIndex:
    """One text's lines, for drafting: `path` names it, `source` says where it came from
    (`document`, `extra`: a chunk the request carried, `workspace`: the language server's
    index)."""

    path: str
    source: str
    lines: list[str]
    by_text: dict[str, list[int]] = field(default_factory=dict)  # stripped line -> rows
    after_text: dict[str, list[int]] = field(default_factory=dict)  # row above's text -> rows
    before_text: dict[str, list[int]] = field(default_factory=dict)  # row below's text -> rows
    after_shape: dict[str, list[int]] = field(default_factory=dict)  # the same by shape()
    before_shape: dict[str, list[int]] = field(default_factory=dict)
    imports: dict[str, frozenset[str]] = field(default_factory=dict)  # import line -> its names
    offset: int = 0  # the row of its file where these lines start (a piece of a long file)
    _sorted: list[str] | None = field(default=None, repr=False)  # by_text's keys, sorted
    _words: dict[int, frozenset[str]] = field(default_factory=dict, repr=False)  # row -> words
    _in_function: list[bool] | None = field(default=None, repr=False)  # in_functions(lines)

    @classmethod
    def build(
        cls,
        path: str,
        source: str,
        text: str,
        skip: tuple[int, int] | None = None,
        keep: tuple[int, int] | None = None,
        offset: int = 0,
        python: bool | None = None,
    ) -> LineIndex:
        """Index `text`; rows in `skip` [lo, hi) are left out as candidates (the cursor's), and
        with `keep` [lo, hi) only those rows are candidates (a piece of a file: the rest is
        context). `offset`: the row of the file where `text` starts (for `where`). Its imports
        are read when it is Python (`python`; None: by `path`)."""
        index = cls(path, source, text.split("\n"), offset=offset)
        lo, hi = keep if keep is not None else (0, len(index.lines))
        by_text: dict[str, list[int]] = defaultdict(list)
        after: dict[str, list[int]] = defaultdict(list)
        before: dict[str, list[int]] = defaultdict(list)
        after_shape: dict[str, list[int]] = defaultdict(list)
        before_shape: dict[str, list[int]] = defaultdict(list)
        shapes: dict[str, str] = {}  # a line's shape, once per distinct line (the regex is slow)
        prev: str | None = None
        prev_shape = ""
        pending: list[int] = []  # rows waiting for their next non-blank line
        for row, line in enumerate(index.lines):
            s = line.strip()
            if not s:
                continue
            sh = shapes.get(s)
            if sh is None:
                sh = shapes[s] = shape(s)
            if pending:
                before[s].extend(pending)
                before_shape[sh].extend(pending)
                pending = []
            if lo <= row < hi and (skip is None or not skip[0] <= row < skip[1]) and _draftable(s):
                by_text[s].append(row)
                if prev is not None:
                    after[prev].append(row)
                    after_shape[prev_shape].append(row)
                pending.append(row)
            prev, prev_shape = s, sh
        index.by_text, index.after_text = dict(by_text), dict(after)
        if is_python(path) if python is None else python:
            index.imports = {s: names for s in by_text if (names := imported_names(s))}
        index.before_text = dict(before)
        index.after_shape, index.before_shape = dict(after_shape), dict(before_shape)
        return index

    def starting_with(self, typed: str) -> list[str]:
        """Line texts that start with `typed` and go on past it (at most MAX_PREFIXED)."""
        if self._sorted is None:
            self._sorted = sorted(self.by_text)
        i = bisect.bisect_right(self._sorted, typed)
        out: list[str] = []
        while i < len(self._sorted) and len(out) < MAX_PREFIXED:
            s = self._sorted[i]
            if not s.startswith(typed):
                break
            out.append(s)
            i += 1
        return out

    def neighbour(self, row: int, step: int, skip: int = 0) -> str:
        """The stripped non-blank line `skip + 1` lines from `row` in direction `step`."""
        r = row + step
        while 0 <= r < len(self.lines):
            s = self.lines[r].strip()
            if s:
                if skip == 0:
                    return s
                skip -= 1
            r += step
        return ""

    def in_function(self, row: int) -> bool:
        """Whether the line at `row` stands in a function's block (`in_functions`)."""
        if self._in_function is None:
            self._in_function = in_functions(self.lines)
        return self._in_function[row]

    def words_of(self, row: int) -> frozenset[str]:
        if row not in self._words:
            self._words[row] = frozenset(words(self.lines[row]))
        return self._words[row]

    def window(self, row: int) -> set[str]:
        lo, hi = max(0, row - WINDOW), min(len(self.lines), row + WINDOW + 1)
        out: set[str] = set()
        for r in range(lo, hi):
            if r != row:
                out |= self.words_of(r)
        return out


_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\b\d+(?:\.\d+)?\b")


def shape(stripped: str) -> str:
    """A line with its string and number literals blanked: lines of the same shape do the
    same thing to other data (`rows = db.query('users')`, `rows = db.query('groups')`)."""
    return _LITERAL.sub("_", stripped)


def fits_scope(cur: Cursor, index: LineIndex, row: int) -> bool:
    """Whether the line at `row` of `index` may stand at the cursor: unless the cursor is in a
    function, a line that stands in one does not."""
    return cur.in_function or not index.in_function(row)


def _draftable(stripped: str) -> bool:
    return len(stripped) >= 2 and len(stripped) <= MAX_LINE_CHARS and not stripped.startswith("#")


@dataclass(frozen=True)
class Cursor:
    """The cursor's place: `typed` on its line after the indentation, `rest` after the cursor
    on the line, the nearest non-blank lines above (`prev`, `prev2`) and below (`next`), the
    indentation step from the line above, the words around, and the names the document knows."""

    indent: str
    typed: str
    rest: str
    prev: str
    prev2: str
    next: str
    step: int
    around: frozenset[str]
    known: frozenset[str]
    next_indent: int = -1  # the indentation of the line below (-1: none)
    in_imports: bool = False  # the line above or below is an import: imports may stand here
    # Only in_imports (import drafts read them, nothing else): the names the document's imports
    # bind, and those it uses as code (code_names) outside its imports.
    imported: frozenset[str] = frozenset()
    used: frozenset[str] = frozenset()
    in_function: bool = True  # the cursor's block is in a function (in_functions)

    @classmethod
    def at(cls, text: str, offset: int, python: bool = True) -> Cursor:
        """The cursor at `offset` of `text`; in a block of imports only in Python (`python`:
        the text is Python, or of no language known)."""
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        end = len(text) if end < 0 else end
        head, rest = text[start:offset], text[offset:end]
        indent = indent_of(head)
        before, after = text[:start].split("\n")[:-1], text[end + 1 :].split("\n")
        prev_lines = [s for s in reversed(before) if s.strip()]
        next_lines = [s for s in after if s.strip()]
        prev_raw = prev_lines[0] if prev_lines else ""
        near = (prev_raw.strip(), next_lines[0].strip() if next_lines else "")
        in_imports = python and any(imported_names(s) for s in near)
        # Imports anywhere, a function's own too, and the names the rest uses; only import
        # drafts read them.
        imported, used = imports_and_uses(before + after if in_imports else [])
        around = set()
        for line in prev_lines[:WINDOW] + next_lines[:WINDOW]:
            around.update(words(line))
        return cls(
            indent=indent,
            typed=head[len(indent) :],
            rest=rest.strip(),
            prev=near[0],
            prev2=prev_lines[1].strip() if len(prev_lines) > 1 else "",
            next=near[1],
            step=len(indent) - len(indent_of(prev_raw)),
            around=frozenset(around),
            known=frozenset(IDENT.findall(text[:start])) | frozenset(IDENT.findall(text[end:])),
            next_indent=len(indent_of(next_lines[0])) if next_lines else -1,
            in_imports=in_imports,
            imported=imported,
            used=used,
            in_function=in_functions([*before[-MAX_SCOPE_ROWS:], indent + "_"])[-1],
        )

    def binds(self, line: str) -> bool:
        """Whether `line` is an import of names the document uses as code and does not import
        yet."""
        names = imported_names(line)
        return bool(names) and names <= self.used and not names & self.imported

    def takes(self, line: str) -> bool:
        """Whether `line` can stand at the cursor: it begins with what is typed and goes on, it
        ends with what follows the cursor, and it opens no block that would stay empty (the
        line below is not indented under the cursor's)."""
        typed, rest = self.typed, self.rest
        if not line.startswith(typed) or len(line) <= len(typed):
            return False
        if rest and (not line.endswith(rest) or len(line) <= len(typed + rest)):
            return False
        return not (line.endswith((":", "{")) and self.next_indent <= len(self.indent))


def _rows(index: LineIndex, cur: Cursor) -> Iterable[int]:
    """The rows worth scoring: those after the cursor's line above and before its line below;
    in the document every other row too, elsewhere those that start with what is typed."""
    seen: set[int] = set()
    keys = (
        (index.after_text, cur.prev),
        (index.before_text, cur.next),
        (index.after_shape, shape(cur.prev)),
        (index.before_shape, shape(cur.next)),
    )
    for table, key in keys:
        for row in table.get(key, ())[:MAX_OCCURRENCES] if key else ():
            if row not in seen:
                seen.add(row)
                yield row
    if cur.in_imports and index.source != "document":  # imports of names the document lacks
        for s in index.imports:
            if cur.binds(s) and s.startswith(cur.typed):
                for row in index.by_text[s][:4]:
                    if row not in seen:
                        seen.add(row)
                        yield row
    if index.source == "document" and len(index.lines) <= MAX_DOCUMENT_ROWS:
        texts: Iterable[str] = index.by_text
    elif cur.typed:
        texts = index.starting_with(cur.typed)
    else:
        return
    for s in texts:
        for row in index.by_text[s][:4]:
            if row not in seen:
                seen.add(row)
                yield row


@dataclass(frozen=True)
class Occurrence:
    """A line of an index that could stand at the cursor, and its features in the order of
    `Weights`' fields (bias last, always 1)."""

    text: str  # the stripped line
    index: LineIndex
    row: int
    features: tuple[float, ...]


def _tail(typed: str) -> str:
    """The last NGRAM words of what is typed (all of it when shorter): what n-gram lookup
    looks for inside other lines."""
    starts = [m.start() for m in _WORD.finditer(typed)]
    return typed[starts[-NGRAM] :] if len(starts) >= NGRAM else ""


def _continuations(index: LineIndex, cur: Cursor, tail: str) -> Iterable[tuple[int, str]]:
    """(row, line) for the lines that hold `tail` after their start and go on past it: the line
    as it would read with the cursor's typed text in front of what follows the tail."""
    found = 0
    for s, rows in index.by_text.items():
        at = s.find(tail)
        if at < 0 or s.startswith(cur.typed):
            continue
        rest = s[at + len(tail) :]
        if rest:
            yield rows[0], cur.typed + rest
            found += 1
            if found >= MAX_PREFIXED:
                return


def occurrences(cur: Cursor, indices: Sequence[LineIndex]) -> list[Occurrence]:
    """Every line of `indices` that fits what is typed around the cursor, with its features;
    and, past what is typed, the continuations of its last words found inside other lines
    (prompt-lookup drafting)."""
    counts: dict[str, int] = {}
    out = []
    tail = _tail(cur.typed)
    for index in indices:
        whole = ((row, index.lines[row].strip(), False) for row in _rows(index, cur))
        inner = ((row, s, True) for row, s in _continuations(index, cur, tail)) if tail else ()
        for row, s, ngram in itertools.chain(whole, inner):
            if not cur.takes(s) or not (ngram or fits_scope(cur, index, row)):
                continue
            names = set(IDENT.findall(s))
            step = len(indent_of(index.lines[row])) - len(indent_of(_raw_above(index, row)))
            features = (
                float(index.neighbour(row, -1) == cur.prev),
                float(bool(cur.prev2) and index.neighbour(row, -1, 1) == cur.prev2),
                float(bool(cur.next) and index.neighbour(row, 1) == cur.next),
                jaccard(index.window(row), cur.around),
                float(step == cur.step),
                math.log(max(1, _count(counts, s, indices))),
                len(names & cur.known) / len(names) if names else 1.0,
                float(index.source == "document"),
                float(s in (cur.prev, cur.next)),
                float(ngram),
                1.0,
            )
            out.append(Occurrence(s, index, row, features))
    return out


def candidates(
    cur: Cursor,
    indices: Sequence[LineIndex],
    limit: int = 8,
    weights: Weights = WEIGHTS,
) -> list[Draft]:
    """The best `limit` distinct line texts for the cursor, best first: each scored by its best
    occurrence."""
    return best_of(cur, occurrences(cur, indices), limit, weights)


def best_occurrences(
    found: Sequence[Occurrence], weights: Weights = WEIGHTS
) -> dict[str, tuple[float, Occurrence]]:
    """Each text's best occurrence and its score: what a text is scored by."""
    best: dict[str, tuple[float, Occurrence]] = {}
    for o in found:
        value = score(o.features, weights)
        if o.text not in best or value > best[o.text][0]:
            best[o.text] = (value, o)
    return best


def best_of(
    cur: Cursor, found: Sequence[Occurrence], limit: int, weights: Weights = WEIGHTS
) -> list[Draft]:
    votes = Counter(o.text for o in found)
    ranked = sorted(best_occurrences(found, weights).values(), key=lambda vo: -vo[0])[:limit]
    out = []
    for value, o in ranked:
        text = o.text[len(cur.typed) :]
        if cur.rest:
            text = text[: len(text) - len(cur.rest)]
        row = o.row + o.index.offset
        where = f"{o.index.path}:{row + 1}" if o.index.path else f"line {row + 1}"
        out.append(Draft(text, o.index.source, value, where, o.features, votes[o.text]))
    return out


def _count(counts: dict[str, int], s: str, indices: Sequence[LineIndex]) -> int:
    if s not in counts:
        counts[s] = sum(len(index.by_text.get(s, ())) for index in indices)
    return counts[s]


def _raw_above(index: LineIndex, row: int) -> str:
    r = row - 1
    while r >= 0 and not index.lines[r].strip():
        r -= 1
    return index.lines[r] if r >= 0 else ""
