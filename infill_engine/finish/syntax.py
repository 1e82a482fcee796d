"""The syntax check that gates every finished fill: does text put into a document add a syntax
error to it (`Check`), and the longest cut of a fill that adds none (`fit`). tree-sitter serves
every language with a grammar (the `grammars` package: the `tree-sitter-<lang>` wheels, nothing
downloaded at run time); where the language's own compiler is at hand in this process (Python's
`compile`, on the block around the insertion: compiles.py), the check is as strict as it. A
language with neither is not checked.

The finishing steps (finish/__init__.py) run it for the language server and for `dllm-infill
fill` alike; the language server's own syntax services (the function body around a position)
live in lsp_server/commands/function_bodies.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from tree_sitter import Node, Parser, Tree

import grammars

from . import unbound
from .compiles import Block
from .returns import Returns


def parser_for(language_id: str) -> Parser | None:
    return grammars.parser(language_id)


def parses(text: str, language_id: str) -> bool | None:
    """True when text parses without error nodes; None for a language without a grammar."""
    parser = parser_for(language_id)
    if parser is None:
        return None
    return not parser.parse(text.encode("utf-8")).root_node.has_error


def point_after(point: tuple[int, int], data: bytes) -> tuple[int, int]:
    """The (row, byte column) reached from point by the bytes data: tree-sitter's coordinates."""
    rows = data.count(b"\n")
    if rows == 0:
        return point[0], point[1] + len(data)
    return point[0] + rows, len(data) - data.rfind(b"\n") - 1


def _error_ranges(root: Node) -> tuple[tuple[int, int], ...]:
    """The byte ranges of the ERROR and MISSING nodes under root, sorted."""
    if not root.has_error:
        return ()
    found, stack = [], [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            found.append((node.start_byte, node.end_byte))
        stack.extend(c for c in node.children if c.has_error or c.is_missing)
    return tuple(sorted(found))


def error_count(text: str, language_id: str) -> int | None:
    """Error and missing nodes in the parse of text; None for a language without a grammar."""
    parser = parser_for(language_id)
    if parser is None:
        return None
    return len(_error_ranges(parser.parse(text.encode("utf-8")).root_node))


# The languages whose own compiler is at hand in this process (compiles.py: Python's), the judge
# of their own syntax where tree-sitter's grammars accept what the language rejects (`self.config
# =` followed by the next line, `f() = 1`, `return` outside a function) and may lag new syntax.
_NATIVE = frozenset({"python"})


@dataclass(frozen=True)
class _Parsed:
    tree: Tree
    errors: tuple[tuple[int, int], ...]


# The document is parsed once for all the candidates of a request and their cuts (Python's
# compile step finds its block in this parse); a few entries, since it changes with every
# keystroke.
@lru_cache(maxsize=4)
def _document_parse(language_id: str, source: bytes) -> _Parsed | None:
    parser = parser_for(language_id)
    if parser is None:
        return None
    tree = parser.parse(source)
    return _Parsed(tree, _error_ranges(tree.root_node))


def forget_documents() -> None:
    """Drop the documents the cache above holds (whole texts, and their trees): a closed
    document is never asked for again, and a large one holds tens of MiB."""
    _document_parse.cache_clear()
    unbound.forget()


@dataclass(frozen=True)
class Around:
    """The document around an insertion: its text before and after, and the text the insertion
    replaces (none for a completion at the cursor; the selection or body for a command).
    `tree`: a tree-sitter tree of that document (before + replaced + after), where the caller
    keeps one (the language server's, reparsed incrementally); the check reads it instead of
    parsing the document again (60 ms for 5,800 lines of Python, 9 ms for 450) wherever it has
    no error, and Python's compile step reads its statements even where it has one."""

    before: str
    after: str
    replaced: str = ""
    tree: Any | None = field(default=None, compare=False, repr=False)


class Check:
    """Whether text put in place of `around.replaced` adds a syntax error to the document.

    Where the language's own compiler is at hand (`_NATIVE`: Python's), it goes first, on the
    block around the insertion (compiles.Block: the top-level statement or method, since one
    compile of a 1,500-line document costs some 20 ms and every cut of every candidate is
    checked): a block that it accepts with the text in it is not broken, whatever tree-sitter's
    grammar says; one that it rejects with the text and accepted without, or whose error lies in
    or after the text and is not the block's own, is. Only when it rejects the block either way
    with the user's error does tree-sitter decide.

    tree-sitter, for every language with a grammar: the new parse may have no more ERROR and
    MISSING nodes than the document, and each, moved back to the document's coordinates, must lie
    inside one the document already had (`_adds_error`). The new text may remove errors, so a
    completion that closes what the user opened passes.
    """

    def __init__(self, around: Around, language_id: str) -> None:
        self.around = around
        self.language_id = language_id
        self._parser = parser_for(language_id)
        self._native = language_id in _NATIVE
        self._head = around.before.encode("utf-8")
        self._old = around.replaced.encode("utf-8")
        self._tail = around.after.encode("utf-8")
        self._at = point_after((0, 0), self._head)
        self._base: _Parsed | None = None
        self._block: Block | None = None

    @property
    def checked(self) -> bool:
        """False for a language with neither a grammar nor a native compiler: all text passes."""
        return self._parser is not None or self._native

    def clean(self, text: str) -> bool:
        if self._native:
            verdict = self._compiled().clean(text)
            if verdict is not None:
                return verdict
        return self._tree_clean(text)

    def reads_unbound(self, text: str) -> bool:
        """Whether text, a draft put in place of the replaced text of a Python document, reads a
        name nothing binds where it lands (unbound.py); False in other languages."""
        if not self._native:
            return False
        tree = self._statements()
        root = tree.root_node if tree is not None else None
        return unbound.reads_unbound(self._compiled(), text, root, self._document)

    @cached_property
    def _document(self) -> bytes:
        """The document's bytes, joined once: the parse cache and the top-level names' cache
        hash it, and a bytes object hashes once."""
        return self._head + self._old + self._tail

    def _given(self) -> Tree | None:
        """The caller's tree of the document (`Around.tree`), where one is given and covers
        the document's bytes."""
        given = self.around.tree
        if given is None or self._parser is None:
            return None
        return given if given.root_node.end_byte == len(self._document) else None

    def _parsed(self) -> _Parsed | None:
        if self._base is None:
            given = self._given()
            if given is not None and not given.root_node.has_error:
                # A clean document's tree: no error to place, so the incremental parse is as
                # good as one from scratch. A broken one is parsed from scratch, as the
                # candidates' errors are (error recovery may place them otherwise).
                self._base = _Parsed(given, ())
            else:
                self._base = _document_parse(self.language_id, self._document)
        return self._base

    def _statements(self) -> Tree | None:
        """A tree of the document for what reads its statements, not its errors (the compile
        step's block, the top level's names): the caller's, broken or not (`_given`), else the
        parse. While a line is typed the document is broken, and a parse from scratch took
        60 ms a request on 5,800 lines; the caller's incremental tree gave the same blocks and
        names as one from scratch at each of 3,510 keystrokes (a line of 40 standard-library
        files removed and typed again, three lines a file)."""
        given = self._given()
        if given is not None:
            return given
        base = self._parsed()
        return base.tree if base is not None else None

    def _compiled(self) -> Block:
        if self._block is None:
            self._block = Block(self._head, self._old, self._tail, self._statements())
        return self._block

    def _tree_clean(self, text: str) -> bool:
        base = self._parsed()
        if self._parser is None or base is None:
            return True
        self._base = base
        new = text.encode("utf-8")
        at, old_end = len(self._head), len(self._head) + len(self._old)
        tree = self._base.tree.copy()  # the cached tree stays the document's
        tree.edit(
            start_byte=at,
            old_end_byte=old_end,
            new_end_byte=at + len(new),
            start_point=self._at,
            old_end_point=point_after(self._at, self._old),
            new_end_point=point_after(self._at, new),
        )
        source = self._head + new + self._tail
        # Reusing the document's subtrees makes the parse of a text that stays clean a fraction
        # of a full one; but error recovery may then place an error otherwise than a parse from
        # scratch would, so errors to compare with the document's are found from scratch.
        errors = _error_ranges(self._parser.parse(source, tree).root_node)
        if errors and not self._base.errors:
            return False
        if errors:
            errors = _error_ranges(self._parser.parse(source).root_node)
        return not _adds_error(self._base.errors, errors, at, old_end, at + len(new))


def _adds_error(
    before: tuple[tuple[int, int], ...],
    after: tuple[tuple[int, int], ...],
    at: int,
    old_end: int,
    new_end: int,
) -> bool:
    """Whether the error ranges `after` (of the document with [at, old_end) replaced by new
    text, now [at, new_end)) hold an error that the ranges `before` do not account for.

    Counting alone lets error recovery hide a new error: folded into an old ERROR node, or one
    error read elsewhere in place of another. An error over the new text passes only when it
    begins in the user's text and the document was already broken all around the insertion;
    one that begins inside the new text is the new text's, and one that ended at the cursor and
    now runs on over it is an unfinished line made longer.
    """
    if len(after) > len(before):
        return True  # never looser than counting
    shift = old_end - new_end
    for start, end in after:
        if end <= at:
            lo, hi, over = start, end, False
        elif start >= new_end:
            lo, hi, over = start + shift, end + shift, False
        elif start < at:
            # An error running from the user's text over the new text: the same error still
            # unfinished, but only where the user's text was broken all around the insertion.
            lo, hi, over = start, max(end + shift, old_end), True
        else:
            return True  # begun inside the new text (a MISSING node in it too): its own
        if not any(s <= lo and hi <= e and (not over or old_end < e) for s, e in before):
            return True
    return False


_CUT = re.compile(r"\w+|\S")  # ends of words and symbols: where a single line may be cut
MAX_CUTS = 24  # the longest cuts tried
MAX_CUT_CHARS = 32_768  # the new text those tries hold in all: a hosted 8,000-character answer
# tries four (each a parse and a compile of it, milliseconds apiece), a fill of 1,300 all 24


def fit(
    prefix: str,
    text: str,
    suffix: str,
    language_id: str,
    replaced: str = "",
    tree: Any | None = None,
) -> str:
    """The longest cut of text that adds no syntax error (`Check`) to the document prefix +
    replaced + suffix when put in place of replaced, or "" when every cut adds one: nothing
    shown may break the document. `tree`: that document's tree, where the caller keeps one
    (`Around`).

    Cuts are at line ends and, on the first line, at word ends; the 24 longest are tried, as
    many as hold 32,768 characters in all (the longest always). The document is the whole of
    it, not a window: a window trimmed mid-string or mid-docstring has errors of its own, and a
    new error hides among them. A language without a grammar (or native compiler) is not checked.
    A one-line text that makes a `return` its function's head rules out (returns.py) is none:
    cut, it would be another statement, not the same one repaired.
    """
    check = Check(Around(prefix, suffix, replaced, tree), language_id)
    if not check.checked:
        return text
    start, end = prefix[prefix.rfind("\n") + 1 :], suffix.split("\n", 1)[0]
    returns = Returns(prefix, language_id) if "return" in start + text else None
    if returns and "\n" not in text and not returns.allows(start + text + end):
        return ""
    cuts = [m.end() for m in _CUT.finditer(text.split("\n", 1)[0])]
    cuts += [i for i, c in enumerate(text) if c == "\n" and i > 0]
    budget = MAX_CUT_CHARS
    for cut in sorted(set(cuts) | {len(text)}, reverse=True)[:MAX_CUTS]:  # longest first
        if budget < cut < len(text):
            break
        budget -= cut
        piece = text[:cut]
        if returns and "\n" not in piece and not returns.allows(start + piece + end):
            continue
        if check.clean(piece):
            return piece
    return ""
