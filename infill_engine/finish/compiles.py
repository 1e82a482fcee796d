"""Python's compile step for a candidate: does CPython's compiler reject the code the candidate
lands in, where it accepted that code without it (`Block`).

The compiler, not the parser: `ast.parse` and tree-sitter's grammar accept `return` or `yield`
outside a function, `await` outside an `async def`, `break`/`continue` outside a loop, duplicate
argument names and `nonlocal` at module level. The compiler's own passes (symbol table and code
generation) reject them, and `compile(source, name, "exec", dont_inherit=True)` runs them. The
code object is dropped: nothing is ever executed.

Not the whole document, but the block around the insertion. Measured on a 1,534-line document,
one `compile` took 21 ms and `ast.parse` 25 ms, and the check runs once per cut of every
candidate (syntax.fit tries up to 24 cuts): whole-document compiles cost a request hundreds of
milliseconds. Every rule above is decided inside the innermost function that holds the statement
(a `return`'s function, a `nonlocal`'s enclosing function, a `break`'s loop), so the compiler
needs only the smallest block that holds the insertion and the function around it:

- the top-level statement of the document's parse (tree-sitter's, cached per document) that
  holds the insertion; inside a class, the method that holds it (classes are descended, a
  function is not: a nested function's `nonlocal` needs its enclosing one);
- an insertion between top-level statements: the statement before it through the one after it
  (a candidate may continue the block above, or decorate the one below).

A method is compiled under an `if 1:` line, so that its indentation stands as it is: no dedent,
no string changed. A method of a 30-line class compiles in well under a millisecond.

The verdict follows the tree-sitter rule of syntax.py (an error the candidate adds, not one the
user's text already has): the block compiles with the candidate: clean; it compiled without it:
rejected; neither compiles: rejected when the error with the candidate lies in or after the new
text and is not the block's own error moved along, else undecided (tree-sitter decides).

The parse those blocks come from is of the document with the hole, and a hole often breaks the
statement it is in: `def raises(` with its parameters missing parses as a statement alone, the
function's body apart from it, and the right line (`err, lamda):`) leaves that block an
unindented `def` that the compiler rejects. So a candidate rejected in its block gets one more
compile (`Block.wider`, at most WIDE_TRIES per candidate): from the last line at no indentation
that starts a statement before it (not a closing bracket, a comment, or an `else`, `elif`,
`except` or `finally` that goes on with the statement before) on to the next one after it. Such
a line may stand inside a string, so a candidate clean there is clean only if the whole document
compiles with it too (one compile more, for the few candidates that get that far; none past
MAX_WHOLE_BYTES). Of the true lines of held-out Python holes (docs/drafts.md, 240), the check
used to reject or cut 10, every one of which compiles in the whole document; it now keeps all.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from functools import cached_property

from tree_sitter import Node, Tree

# Python's compiler errors: SyntaxError (and its IndentationError / TabError); ValueError: a null
# byte; the rest: a pathological nesting depth or size.
_REJECTED = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
_HEADER = "if 1:\n"  # what an indented method is compiled under
_FUNCTIONS = frozenset({"function_definition"})
_CLASSES = frozenset({"class_definition"})
WIDE_TRIES = 1  # compiles in the wider window, per candidate (its longest cut rejected)
MAX_WIDE_CHARS = 20_000  # a wider window longer than this is not compiled
MAX_WHOLE_BYTES = 100_000  # nor is a document longer than this (some 30 ms)
# A line at no indentation that goes on with the statement before it, rather than starting one.
_GOES_ON = re.compile(r"[)\]}#]|(?:else|elif|except|finally)\b")


@dataclass(frozen=True)
class _Error:
    """Where the compiler stopped: a character offset in the compiled source (-1: unknown)."""

    at: int
    message: str


def compile_error(source: str) -> _Error | None:
    """None when CPython's compiler accepts source, else where and why it does not. Compiled
    only, never run; its warnings (an invalid escape) are the user's business, not the log's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(source, "<document>", "exec", dont_inherit=True)
        except SyntaxError as e:
            return _Error(_offset(source, e.lineno, e.offset), e.msg)
        except _REJECTED as e:
            return _Error(-1, type(e).__name__)
    return None


def compiles(source: str) -> bool:
    return compile_error(source) is None


def _offset(source: str, lineno: int | None, column: int | None) -> int:
    """The character offset of a SyntaxError's 1-based line and column in source."""
    if not lineno:
        return -1
    start = 0
    for _ in range(lineno - 1):
        start = source.find("\n", start) + 1
        if start == 0:
            return len(source)
    return min(len(source), start + max(0, (column or 1) - 1))


def _definition(node: Node) -> Node:
    """The class or function a decorated definition decorates; any other node itself."""
    if node.type == "decorated_definition":
        inner = node.child_by_field_name("definition")
        return inner if inner is not None else node
    return node


def _holds(node: Node, at: int, end: int) -> bool:
    return node.start_byte < at and end <= node.end_byte


def _code(children: list[Node]) -> list[Node]:
    return [c for c in children if c.type != "comment"]


def blocks(tree: Tree, at: int, end: int) -> list[tuple[int, int]]:
    """The byte ranges [start, stop) that may be compiled for an insertion replacing bytes
    [at, end) of the document `tree` parsed, the first preferred (see the module's docstring):
    between top-level statements, also the one before without the one after (which the user may
    be writing)."""
    top = _code(tree.root_node.children)
    held = [c for c in top if _holds(c, at, end)]
    if not held:
        before = [c for c in top if c.start_byte < at]
        after = [c for c in top if c.end_byte > end]
        start = before[-1].start_byte if before else 0
        stop = after[0].end_byte if after else tree.root_node.end_byte
        return [(start, max(stop, end)), (start, end)] if stop > end else [(start, end)]
    node = held[0]
    while _definition(node).type in _CLASSES:
        body = _definition(node).child_by_field_name("body")
        inner = [c for c in _code(body.children) if _holds(c, at, end)] if body else []
        if not inner or _definition(inner[0]).type not in _FUNCTIONS | _CLASSES:
            break
        node = inner[0]
    return [(node.start_byte, node.end_byte)]


class Block:
    """The compile step for candidates put in place of bytes [at, end) of a Python document
    (`head` + old + `tail` as bytes, parsed as `tree`), or of the whole document without a tree.
    `clean` answers True (compiles), False (the candidate adds a compile error) or None (the
    block is broken either way, and the error is not the candidate's: undecided)."""

    def __init__(self, head: bytes, old: bytes, tail: bytes, tree: Tree | None) -> None:
        self.replaced = old.decode("utf-8", "replace")
        self._head, self._tail = head, tail
        self._wide_tries = WIDE_TRIES
        end = len(head) + len(old)
        ranges = blocks(tree, len(head), end) if tree is not None else [(0, end + len(tail))]
        self.before, self.after = _cut(head, tail, end, ranges[0])
        self._own: tuple[_Error | None] | None = None  # the block's own error, once compiled
        for other in ranges[1:]:  # a smaller block, where the first is broken without the text
            if self.own is None:
                break
            self.before, self.after = _cut(head, tail, end, other)
            self._own = None

    @property
    def header(self) -> str:
        return _HEADER if self.before[:1] in (" ", "\t") else ""

    def _source(self, text: str) -> str:
        return self.header + self.before + text + self.after

    @property
    def own(self) -> _Error | None:
        """The block's own compile error without the candidate (None: it compiles)."""
        if self._own is None:
            self._own = (compile_error(self._source(self.replaced)),)
        return self._own[0]

    def clean(self, text: str) -> bool | None:
        error = compile_error(self._source(text))
        if error is None:
            return True
        verdict = self._verdict(text, error)
        if verdict is False and self._wide_tries > 0 and (wider := self.wider) is not None:
            self._wide_tries -= 1
            before, after = wider
            header = _HEADER if before[:1].isspace() else ""
            if compile_error(header + before + text + after) is None and self._whole(text):
                return True
        return verdict

    def _verdict(self, text: str, error: _Error) -> bool | None:
        own = self.own
        if own is None:
            return False
        at = len(self.header) + len(self.before)
        if error.at < at:
            return None  # the user's text breaks first
        if error.at < at + len(text):
            return False  # inside the candidate: its own
        moved = error.at - len(text) + len(self.replaced)
        return None if (moved, error.message) == (own.at, own.message) else False

    def _whole(self, text: str) -> bool:
        """Whether the whole document compiles with `text` in place (none past MAX_WHOLE_BYTES):
        a line at no indentation may stand inside a string, and a wider window cut there can
        compile with a candidate that opens one."""
        if len(self._head) + len(self._tail) > MAX_WHOLE_BYTES:
            return False
        head, tail = (b.decode("utf-8", "replace") for b in (self._head, self._tail))
        return compile_error(head + text + tail) is None

    @cached_property
    def wider(self) -> tuple[str, str] | None:
        """The text before and after the insertion from the last line at no indentation that
        starts a statement before it (or the block's start, where that is earlier) on to the
        next one after it (the document's end where none follows): None where that is the
        block's own, or either side is longer than MAX_WIDE_CHARS."""
        head = self._head[-MAX_WIDE_CHARS - 1 :].decode("utf-8", "replace").split("\n")
        for i in range(len(head) - 1, -1, -1):
            if _starts(head[i]) and (i > 0 or len(self._head) <= MAX_WIDE_CHARS):
                before = "\n".join(head[i:])
                break
        else:
            return None
        before = max(before, self.before, key=len)
        tail = self._tail[: MAX_WIDE_CHARS + 1].decode("utf-8", "replace").split("\n")
        size = len(tail[0])  # the rest of the insertion's line goes on with it
        for line in tail[1:]:
            if _starts(line):
                break
            size += 1 + len(line)
        else:
            if len(self._tail) > MAX_WIDE_CHARS:
                return None
        after = "\n".join(tail)[:size]
        if size > MAX_WIDE_CHARS or (before, after) == (self.before, self.after):
            return None
        return before, after


def _starts(line: str) -> bool:
    """Whether a line starts a statement at no indentation: not blank, not indented, and not one
    that goes on with the statement before (a closing bracket, a comment, `else`...)."""
    return bool(line.strip()) and not line[:1].isspace() and not _GOES_ON.match(line)


def _cut(head: bytes, tail: bytes, end: int, block: tuple[int, int]) -> tuple[str, str]:
    """The block's text before and after the insertion, from the start of its first line."""
    start, stop = block
    start = head.rfind(b"\n", 0, start) + 1
    after = tail[: stop - end] if stop > end else b""
    return head[start:].decode("utf-8", "replace"), after.decode("utf-8", "replace")
