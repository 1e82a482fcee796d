"""The span planner: what kind of hole the cursor is in, how many masks to start with, how far the
span may grow, where the construct ends, and how much context the model gets.

It is the one owner of these decisions; the language server, the CLI and the evaluation all call
`plan()`. The hole kinds:

| kind          | where the cursor is                                   | stop rule            |
|---------------|-------------------------------------------------------|----------------------|
| line          | at the end of (or inside) a line of code              | newline at depth 0   |
| expression    | inside an open bracket: an argument list, a literal   | the bracket's closer |
| statement     | on a blank line among statements, or at the start of a | newline at depth 0,  |
|               | line of code (then the newline is kept)               | or the block it opens|
| block_body    | after a block opener (`:`, `{`), the block still empty | dedent / closing `}` |
| function_body | the same, in a function                               | dedent / closing `}` |
| empty_body    | in a body holding only `pass`, `...` or `{}`          | dedent / closing `}` |
| selection     | a selected range (the editing commands)               | none                 |

The initial length comes from the same file: the token lengths of nearby lines at the cursor's
indentation (line kinds) or of sibling bodies found by the grammar's queries (`grammars/<lang>/
functions.scm`, `blocks.scm`), times a ratio per kind from `assets/span_table.json`. That table
is written by `python -m infill_engine.lab.span_calibrate` from holes cut in the training corpus,
not tuned by hand. With no evidence in the file, the table's default length for the kind is used.
A language without a grammar is planned from its lines alone.

Planning is on the typing path, so it stays local: the queries run only over the bytes near the
cursor (the enclosing construct, or WINDOW around it for sibling bodies), the text is parsed at
most once per call (never when the caller passes its tree), and only evidence lines and bodies
are tokenized. docs/planner.md has the measured speed and accuracy.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import statistics
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal

from . import lexer
from .lexer import CLOSERS
from .request import DEFAULT_PARAMS, PREFIX_TOKENS, SUFFIX_TOKENS, budgets
from .stop import StopRule, indent_width

log = logging.getLogger("infill_engine.planner")

HoleKind = Literal[
    "line", "expression", "statement", "block_body", "function_body", "empty_body", "selection"
]
KINDS: tuple[str, ...] = (
    "line",
    "expression",
    "statement",
    "block_body",
    "function_body",
    "empty_body",
    "selection",
)
TABLE = Path(__file__).with_name("assets") / "span_table.json"
ROW_KEYS = ("ratio", "ratio_hi", "default", "default_hi")  # what the plan reads of a table row
WINDOW = 20_000  # characters (bytes, for the grammar's bodies) around the cursor searched
NEARBY_LINES = 12  # lines at the cursor's indentation that make the evidence
SIBLINGS = 8  # bodies that make the evidence
RADII = (2_000, 6_000, WINDOW)  # bytes searched for them, the next only if too few were found
SAMPLE_CHARS = 1_500  # a body longer than this is measured on its head and scaled
LIKE = {"empty_body": "function_body"}  # a kind the table lacks is sized like this one
# Used only when the table is missing (a fresh calibration run writes it).
FALLBACK: dict[str, dict[str, float]] = {
    k: {"ratio": 1.0, "ratio_hi": 3.0, "default": d, "default_hi": 4 * d}
    for k, d in (
        ("line", 8),
        ("expression", 6),
        ("statement", 10),
        ("block_body", 40),
        ("function_body", 60),
        ("empty_body", 60),
        ("selection", 16),
    )
}


@dataclass(frozen=True)
class SpanPlan:
    kind: HoleKind
    span: int  # the masks placed at the start, in tokens
    max_span: int  # the most the span may grow to
    stop: StopRule  # where the construct ends
    prefix_tokens: int  # context budgets, within the model's positions
    suffix_tokens: int
    language_id: str
    evidence: float | None  # the same-file length (tokens) the span came from; None: default


Encode = Callable[[str], list[int]]


def plan(
    text: str,
    offset: int,
    language_id: str,
    encode: Encode,
    *,
    end: int | None = None,
    tree: Any | None = None,
    max_positions: int = 4096,
    prefix_tokens: int = PREFIX_TOKENS,
    suffix_tokens: int = SUFFIX_TOKENS,
    max_span: int = DEFAULT_PARAMS.max_span,
    block_size: int = 32,
) -> SpanPlan:
    """Plan the hole at `offset` (a str offset into `text`); `end` > offset makes it a selection.

    `tree` is the document's current tree-sitter tree when the caller keeps one (the language
    server parses incrementally); without it the text is parsed here, if a grammar exists."""
    offset = max(0, min(offset, len(text)))
    doc = _Doc(text, offset, language_id, tree)
    spec = _spec(language_id)
    comment = spec.line_comment if spec is not None else "#"
    braces = spec is not None and spec.block_style == "brace"
    lo = text.rfind("\n", 0, offset) + 1
    hi = text.find("\n", offset)
    hi = len(text) if hi < 0 else hi
    before, after = text[lo:offset], text[offset:hi]
    table = _table()
    evidence: float | None
    if end is not None and end > offset:
        kind: HoleKind = "selection"
        evidence = float(len(encode(text[offset:end])))
        stop = StopRule()
    else:
        kind, stop = _classify(doc, before, after, braces, comment)
        evidence = _evidence(doc, kind, before, encode)
    row = table.get(kind) or table.get(LIKE.get(kind, kind)) or FALLBACK[kind]
    if evidence is None:
        cpt = _chars_per_token(text, offset, encode)
        guess, high = row["default"] / cpt, row["default_hi"] / cpt
    else:
        guess, high = row["ratio"] * evidence, row["ratio_hi"] * evidence
    cap = max(1, min(max_span, max_positions // 2))
    span = max(1, min(cap, round(guess)))
    longest = max(span, min(cap, round(high) + (0 if kind == "selection" else block_size // 4)))
    pre, suf = budgets(max_positions, span, prefix_tokens, suffix_tokens)
    return SpanPlan(kind, span, longest, stop, pre, suf, language_id, evidence)


# -- the document -----------------------------------------------------------------------------
class _Doc:
    """One plan's view of the document: its root node, parsed at most once and only when a
    grammar query is needed, and the grammar's captures near the cursor."""

    def __init__(self, text: str, offset: int, language_id: str, tree: Any | None) -> None:
        self.text, self.offset, self.language_id, self._tree = text, offset, language_id, tree
        self._root: Any | None = None
        self._parsed = False
        self._byte: int | None = None

    @property
    def byte(self) -> int:
        """The cursor as a byte offset into the UTF-8 text."""
        if self._byte is None:
            self._byte = len(self.text[: self.offset].encode("utf-8"))
        return self._byte

    def root(self) -> Any | None:
        if not self._parsed:
            self._root, self._parsed = _root(self.text, self.language_id, self._tree), True
        return self._root

    def captures(self, query: str, capture: str, start: int, end: int) -> list[Any]:
        """The query's `capture` nodes that overlap bytes [start, end), each once, in document
        order: `grammars.captures` limited to a byte range, so that the cost grows with the
        range and not with the file."""
        root = self.root()
        if root is None:
            return []
        from tree_sitter import QueryCursor

        import grammars

        compiled = grammars.query(self.language_id, query)
        if compiled is None:
            return []
        cursor = QueryCursor(compiled)
        cursor.set_byte_range(max(0, start), max(0, start, end))
        nodes = cursor.captures(root).get(capture, [])
        return sorted(dict.fromkeys(nodes), key=lambda n: (n.start_byte, -n.end_byte))


# -- classification ---------------------------------------------------------------------------
def _classify(
    doc: _Doc, before: str, after: str, braces: bool, comment: str
) -> tuple[HoleKind, StopRule]:
    text, offset = doc.text, doc.offset
    line_rule = StopRule("line", comment=comment)
    # A statement may open a block (Python's `:`; braces are counted as brackets anyway).
    statement_rule = StopRule("line", comment=comment, opener="" if braces else ":", statement=True)
    open_on_line = lexer.depth(before, comment) > 0
    code = lexer.strip_comment(before, comment).rstrip()
    opener = "{" if braces else ":"
    if after.strip() and not before:
        # At the start of a line of code: a statement inserted before it, ending in a newline.
        return "statement", replace(statement_rule, newline=True)
    if after.strip():
        if braces and code.endswith("{") and after.lstrip().startswith("}"):
            return "empty_body", StopRule("brace", comment=comment)  # `{|}`
        if open_on_line and after.lstrip()[:1] in CLOSERS:
            return "expression", StopRule("expression", comment=comment)
        return "line", line_rule
    if code:
        if code.endswith(opener) and lexer.depth(code[:-1], comment) <= 0:
            kind = _body_kind(doc, code, braces)
            return kind, _block_rule(before, braces, comment)
        return "line", line_rule
    # a blank line: a body still to write, an empty body, or one more statement
    prev = _prev_code_line(text, offset - len(before), comment)
    cursor_indent = indent_width(before)
    nxt = _next_code_line(text, offset + len(after), comment)
    if prev is not None and lexer.strip_comment(prev, comment).rstrip().endswith(opener):
        header_indent = indent_width(prev)
        next_closes = nxt is None or (
            indent_width(nxt) <= header_indent
            if not braces
            else nxt.strip().startswith("}") and indent_width(nxt) <= header_indent
        )
        if next_closes or _placeholder(nxt, braces):
            kind = _body_kind(doc, lexer.strip_comment(prev, comment).rstrip(), braces)
            if nxt is not None and _placeholder(nxt, braces):
                kind = "empty_body"
            body_indent = max(cursor_indent, header_indent + 1)
            return kind, (
                StopRule("brace", comment=comment)
                if braces
                else StopRule("indent", indent=body_indent, comment=comment)
            )
    return "statement", statement_rule


def _block_rule(before: str, braces: bool, comment: str) -> StopRule:
    if braces:
        return StopRule("brace", comment=comment)
    return StopRule("indent", indent=indent_width(before) + 1, comment=comment)


def _body_kind(doc: _Doc, header: str, braces: bool) -> HoleKind:
    """A function's body or another block's, from the grammar when there is one: whichever
    encloses the cursor more closely."""
    if not braces:
        words = header.lstrip().split("(", 1)[0].split()
        return (
            "function_body"
            if words[:1] == ["def"] or words[:2] == ["async", "def"]
            else ("block_body")
        )
    if doc.root() is None:
        return "block_body"
    byte = doc.byte

    def innermost(query: str, capture: str) -> int:
        # only the nodes around the cursor: a node holding it overlaps [byte - 1, byte + 1)
        nodes = doc.captures(query, capture, byte - 1, byte + 1)
        return max((n.start_byte for n in nodes if n.start_byte < byte <= n.end_byte), default=-1)

    function, block = innermost("functions", "body"), innermost("blocks", "block")
    return "function_body" if function >= 0 and function >= block else "block_body"


def _placeholder(line: str | None, braces: bool) -> bool:
    if line is None:
        return False
    s = line.strip()
    return s in ("pass", "...") if not braces else False


def _prev_code_line(text: str, line_start: int, comment: str) -> str | None:
    pos = line_start - 1
    while pos > 0:
        s = text.rfind("\n", 0, pos) + 1
        line = text[s:pos]
        if lexer.strip_comment(line, comment).strip():
            return line
        pos = s - 1
    return None


def _next_code_line(text: str, line_end: int, comment: str) -> str | None:
    pos = line_end + 1
    while pos < len(text):
        e = text.find("\n", pos)
        e = len(text) if e < 0 else e
        line = text[pos:e]
        if lexer.strip_comment(line, comment).strip():
            return line
        pos = e + 1
    return None


# -- evidence ---------------------------------------------------------------------------------
def _evidence(doc: _Doc, kind: HoleKind, before: str, encode: Encode) -> float | None:
    """A same-file length, in tokens, that the kind's length scales with."""
    text, offset = doc.text, doc.offset
    if kind in ("line", "expression", "statement"):
        lines = _nearby_lines(text, offset, indent_width(before) if before.strip() else None)
        if not lines:
            return None
        typical = float(statistics.median(_COUNTS.count(encode, s) for s in lines))
        if kind == "statement":
            return typical
        typed = len(encode(before.strip())) if before.strip() else 0
        return max(typical / 4, typical - typed)
    bodies = _sibling_bodies(doc, kind)
    if not bodies:
        return None
    return float(statistics.median(_measure(b, encode) for b in bodies))


def _nearby_lines(text: str, offset: int, indent: int | None) -> list[str]:
    """Up to NEARBY_LINES code lines nearest the cursor's line at its indentation (any
    indentation when the cursor's line has none yet), within WINDOW characters."""
    lo = max(0, offset - WINDOW // 2)
    hi = min(len(text), offset + WINDOW // 2)
    lo = text.rfind("\n", 0, lo) + 1 if lo else 0
    cursor_line = text.count("\n", lo, offset)
    if indent is None:
        ls = text.rfind("\n", 0, offset) + 1
        indent = indent_width(text[ls:offset])
    lines = text[lo:hi].split("\n")
    out: list[str] = []
    # outwards from the cursor's line, the line above before the one below at each distance
    for distance in range(1, max(cursor_line, len(lines) - 1 - cursor_line) + 1):
        for i in (cursor_line - distance, cursor_line + distance):
            if 0 <= i < len(lines) and lines[i].strip() and indent_width(lines[i]) == indent:
                out.append(lines[i].strip())
                if len(out) == NEARBY_LINES:
                    return out
    return out


def _sibling_bodies(doc: _Doc, kind: HoleKind) -> list[str]:
    """The texts of up to SIBLINGS function bodies (or blocks) nearest the cursor, not the one it
    is in; within WINDOW bytes."""
    if doc.root() is None:
        return []
    query, capture = ("functions", "body") if kind != "block_body" else ("blocks", "block")
    byte = doc.byte
    found: list[tuple[int, int, int]] = []
    # The nearest are usually close: look near first, and further only while fewer than SIBLINGS
    # are found (every node within `radius` is among those found, so the nearest are the same).
    for radius in RADII:
        found = []
        # a node within `radius` of the cursor overlaps these bytes (one more each side, for a
        # node ending or starting exactly there)
        for node in doc.captures(query, capture, byte - radius - 1, byte + radius + 1):
            if node.start_byte <= byte <= node.end_byte:
                continue
            distance = min(abs(node.start_byte - byte), abs(node.end_byte - byte))
            if distance > radius:
                continue
            if kind == "block_body" and _defines(node):
                continue  # a function's or a class's body is no sibling of an if's or a loop's
            found.append((distance, node.start_byte, node.end_byte))
        if len(found) >= SIBLINGS:
            break
    found.sort()
    raw = doc.text.encode("utf-8")
    out = []
    for _, s, e in found[:SIBLINGS]:
        body = raw[s:e].decode("utf-8", "replace")
        if body.startswith("{"):
            body = body[1:-1] if body.endswith("}") else body[1:]
        if body.strip():
            out.append(body.strip("\n"))
    return out


def _defines(block: Any) -> bool:
    parent = block.parent
    return parent is not None and any(
        w in parent.type for w in ("function", "method", "class", "constructor", "impl", "struct")
    )


def _measure(body: str, encode: Encode) -> float:
    if len(body) <= SAMPLE_CHARS:
        return float(_COUNTS.count(encode, body))
    head = body[:SAMPLE_CHARS]
    return _COUNTS.count(encode, head) * len(body) / SAMPLE_CHARS


class _Counts:
    """Token counts of evidence strings (nearby lines, sibling bodies), kept between plans for
    one encode function: a document being typed in keeps nearly all of them from one request
    to the next, and tokenizing them is most of a plan's cost. The function is held weakly (a
    bound method through its object), so an engine that was replaced is not kept alive; a new
    function starts the counts afresh."""

    LIMIT = 8192  # strings remembered; SAMPLE_CHARS each at most

    def __init__(self) -> None:
        self._owner: Callable[[], Any] | None = None
        self._counts: dict[str, int] = {}

    def count(self, encode: Encode, s: str) -> int:
        if len(s) > SAMPLE_CHARS:
            return len(encode(s))
        if self._owner is None or self._owner() != encode:
            self._counts = {}
            self._owner = _weak(encode)
            if self._owner is None:
                return len(encode(s))  # cannot be held weakly: not cached
        n = self._counts.get(s)
        if n is None:
            if len(self._counts) >= self.LIMIT:
                self._counts = {}
            n = self._counts[s] = len(encode(s))
        return n

    def clear(self) -> None:
        self._owner, self._counts = None, {}


def _weak(f: Encode) -> Callable[[], Any] | None:
    try:
        return weakref.WeakMethod(f) if inspect.ismethod(f) else weakref.ref(f)
    except TypeError:
        return None


_COUNTS = _Counts()


def clear_caches() -> None:
    """Forget the remembered token counts (timing a cold plan; a new tokenizer needs no call)."""
    _COUNTS.clear()


def _chars_per_token(text: str, offset: int, encode: Encode) -> float:
    sample = text[max(0, offset - 600) : offset + 200]
    n = len(encode(sample)) if sample.strip() else 0
    return max(1.0, len(sample) / n) if n else 3.5


def _root(text: str, language_id: str, tree: Any | None) -> Any | None:
    if tree is not None:
        return tree.root_node
    import grammars

    parser = grammars.parser(language_id)
    if parser is None:
        return None
    return parser.parse(text.encode("utf-8")).root_node


def _spec(language_id: str) -> Any | None:
    import grammars

    return grammars.spec(language_id)


@cache
def _table(path: Path = TABLE) -> dict[str, dict[str, float]]:
    """The calibrated table's kinds. A table that cannot be read, or an entry without the four
    positive numbers, is logged once as a warning and FALLBACK sizes those kinds: a planner
    that quietly ran on defaults would look calibrated while it is not."""
    try:
        data = json.loads(path.read_text())
        kinds = data["kinds"]
        if not isinstance(kinds, dict):
            raise ValueError("'kinds' is not a map")
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("span table %s is unusable (%s); default sizes are used", path, e)
        return {}
    table: dict[str, dict[str, float]] = {}
    for kind, row in kinds.items():
        values: list[Any] = [row.get(k) if isinstance(row, dict) else None for k in ROW_KEYS]
        if all(_positive(v) for v in values):
            table[str(kind)] = {k: float(v) for k, v in zip(ROW_KEYS, values, strict=True)}
        else:
            keys = "/".join(ROW_KEYS)
            log.warning(
                "span table %s: kind %r lacks positive %s; defaults size it", path, kind, keys
            )
    return table


def _positive(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0
