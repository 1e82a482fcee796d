"""Syntax services: does a text parse, where is the body of the function around a position, and
does text put into a document add a syntax error to it (`Check`, `fit`: the gate for everything
shown or applied). tree-sitter serves every language with a grammar; the grammars and their
queries belong to the `grammars` package (the individual `tree-sitter-<lang>` wheels, so nothing
is downloaded at run time), and a language without a grammar simply has no syntax services.
Where the language's own parser is at hand in this process (Python's `compile`), the check is
as strict as it.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from tree_sitter import Node, Parser, QueryCursor, Tree

import grammars

from . import positions
from .postprocess import Indent, detect_indent


def parser_for(language_id: str) -> Parser | None:
    return grammars.parser(language_id)


def parses(text: str, language_id: str) -> bool | None:
    """True when text parses without error nodes; None for a language without a grammar."""
    parser = parser_for(language_id)
    if parser is None:
        return None
    return not parser.parse(text.encode("utf-8")).root_node.has_error


@dataclass(frozen=True)
class BodyHole:
    """The part of a function to regenerate, as str offsets [start, end) into the document."""

    start: int
    end: int
    indent: str  # the indentation of the body's lines
    name: str


def function_body(text: str, offset: int, language_id: str) -> BodyHole | None:
    """The body of the innermost function around offset: for an indented body (Python) its
    statements after the docstring, for a braced one the lines between the braces."""
    spec, parser = grammars.spec(language_id), parser_for(language_id)
    query = grammars.query(language_id, "functions")
    if spec is None or parser is None or query is None:
        return None
    root = parser.parse(text.encode("utf-8")).root_node
    # function node id -> (its body, its name); a function matched twice (once named through
    # the variable it is bound to) keeps the name.
    functions: dict[int, tuple[Node, str]] = {}
    for _, match in QueryCursor(query).matches(root):
        function, named = match["function"][0], match.get("name", [None])[0]
        if named is not None or function.id not in functions:
            label = named.text.decode("utf-8", "replace") if named and named.text else "?"
            functions[function.id] = (match["body"][0], label)
    found = _enclosing(root, positions.byte_offset(text, offset), functions)
    if found is None and spec.block_style == "indent":
        found = _function_above_blank_line(text, offset, root, functions)
    if found is None:
        return None
    body, name = functions[found.id]
    if spec.block_style == "indent":
        return _indented_body(text, body, name)
    return _braced_body(text, body, name)


def _indented_body(text: str, body: Node, name: str) -> BodyHole | None:
    """The statements of the block after its docstring, whole lines with their indentation; an
    empty hole below a docstring that is the whole body."""
    if not body.named_children:
        return None
    stmts = body.named_children
    first = stmts[0]
    if _is_docstring(first):
        stmts = stmts[1:]
    start_byte = stmts[0].start_byte if stmts else first.end_byte
    start = positions.offset_from_byte(text, start_byte)
    line_start, _ = positions.line_at(text, start)
    indent = _indentation(text, positions.offset_from_byte(text, first.start_byte))
    if stmts and text[line_start:start].strip() == "":
        start = line_start  # regenerate whole lines, indentation included
    elif not stmts:
        nl = text.find("\n", start)
        start = len(text) if nl < 0 else nl + 1  # only a docstring: the body goes after it
    end = positions.offset_from_byte(text, body.end_byte) if stmts else start
    return BodyHole(start, end, indent, name)


def _braced_body(text: str, body: Node, name: str) -> BodyHole:
    """Inside the braces: from the line after the `{` to the start of the `}` line, or the text
    between the braces where statements share a line with them (`{ return 1; }`)."""
    opened = positions.offset_from_byte(text, body.start_byte) + 1  # just after the "{"
    closed = positions.offset_from_byte(text, body.end_byte)
    if text[closed - 1 : closed] == "}":
        closed -= 1  # else the "}" is missing and the body runs to the end of the node
    inner = text[opened:closed]
    stmts = [c for c in body.named_children if "comment" not in c.type]
    first = positions.offset_from_byte(text, stmts[0].start_byte) if stmts else closed
    nl = inner.find("\n")
    if nl >= 0 and opened + nl < first:
        start = opened + nl + 1  # a comment after the "{" stays with it
    else:
        start = opened + len(inner) - len(inner.lstrip())
    line_start, _ = positions.line_at(text, closed)
    end = line_start if not text[line_start:closed].strip() else opened + len(inner.rstrip())
    if stmts:
        indent = _indentation(text, first)
    else:
        outer = _indentation(text, opened - 1)
        unit = detect_indent(text, Indent("\t", 1) if outer.startswith("\t") else Indent(" ", 4))
        indent = outer + unit.char * unit.width
    return BodyHole(start, max(start, end), indent, name)


def _indentation(text: str, offset: int) -> str:
    """The leading whitespace of the line holding offset."""
    start, end = positions.line_at(text, offset)
    line = text[start:end]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _enclosing(root: Node, byte: int, functions: dict[int, tuple[Node, str]]) -> Node | None:
    node: Node | None = root.descendant_for_byte_range(byte, byte)
    while node is not None and node.id not in functions:
        node = node.parent
    return node


def _function_above_blank_line(
    text: str, offset: int, root: Node, functions: dict[int, tuple[Node, str]]
) -> Node | None:
    """On a blank line below a function, indented deeper than its `def`: that function. The
    tree ends a function at its last statement, but an editor's cursor sits on the empty body
    line below it, where the user is about to write."""
    start, end = positions.line_at(text, offset)
    line = text[start:end]
    if line.strip():
        return None
    column = len(line.expandtabs(8))
    before = len(text[:start].rstrip())
    if column == 0 or before == 0:
        return None
    node = _enclosing(root, positions.byte_offset(text, before - 1), functions)
    while node is not None and node.start_point.column >= column:
        node = node.parent  # the next function out
        while node is not None and node.id not in functions:
            node = node.parent
    return node


def _is_docstring(node: Node) -> bool:
    return (
        node.type == "expression_statement"
        and node.named_child_count == 1
        and node.named_children[0].type in ("string", "concatenated_string")
    )


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


def _python_compiles(source: str) -> bool:
    """Whether CPython's own compiler accepts source. Compiled only, never run: the code object
    is dropped. Its warnings (an invalid escape) are the user's business, not the server's log."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(source, "<document>", "exec", dont_inherit=True)
        # ValueError: a null byte (before 3.12); the others: a pathological nesting depth
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return False
    return True


# languageId -> the language's own parser, where one is at hand in this process: the judge of its
# own syntax, where tree-sitter's grammars accept what the language rejects (`self.config =`
# followed by the next line, `f() = 1`, `return` outside a function) and may lag new syntax.
_NATIVE: dict[str, Callable[[str], bool]] = {"python": _python_compiles}


@dataclass(frozen=True)
class _Parsed:
    tree: Tree
    errors: tuple[tuple[int, int], ...]


# The document is parsed, and compiled, once for all the candidates of a request and their cuts;
# a few entries, since it changes with every keystroke.
@lru_cache(maxsize=4)
def _document_parse(language_id: str, source: bytes) -> _Parsed | None:
    parser = parser_for(language_id)
    if parser is None:
        return None
    tree = parser.parse(source)
    return _Parsed(tree, _error_ranges(tree.root_node))


@lru_cache(maxsize=4)
def _document_compiles(language_id: str, source: str) -> bool:
    return _NATIVE[language_id](source)


@dataclass(frozen=True)
class Around:
    """The document around an insertion: its text before and after, and the text the insertion
    replaces (none for a completion at the cursor; the selection or body for a command)."""

    before: str
    after: str
    replaced: str = ""


class Check:
    """Whether text put in place of `around.replaced` adds a syntax error to the document.

    Where the language's own parser is at hand (`_NATIVE`), it goes first: a document that it
    accepts with the text in it is not broken, whatever tree-sitter's grammar says; one that it
    rejects with the text, and accepts without, is. Only when it rejects the document either way
    does tree-sitter decide. First, because it is the cheaper of the two where it answers: one
    compile of a 1,500-line document takes about 5 ms, while tree-sitter parses the document
    too, and a cut with an opened triple-quoted string (the rest of the document turned into a
    string, error recovery over all of it) took it some 55 ms.

    tree-sitter, for every language with a grammar: the new parse may have no more ERROR and
    MISSING nodes than the document, and each, moved back to the document's coordinates, must lie
    inside one the document already had (`_adds_error`). The new text may remove errors, so a
    completion that closes what the user opened passes.
    """

    def __init__(self, around: Around, language_id: str) -> None:
        self.around = around
        self.language_id = language_id
        self._parser = parser_for(language_id)
        self._native = _NATIVE.get(language_id)
        self._head = around.before.encode("utf-8")
        self._old = around.replaced.encode("utf-8")
        self._tail = around.after.encode("utf-8")
        self._at = positions.point_after((0, 0), self._head)
        self._base: _Parsed | None = None

    @property
    def checked(self) -> bool:
        """False for a language with neither a grammar nor a native parser: all text passes."""
        return self._parser is not None or self._native is not None

    def clean(self, text: str) -> bool:
        if self._native is not None:
            a = self.around
            if self._native(a.before + text + a.after):
                return True
            # Only now the document itself, once per document: most texts compile.
            if _document_compiles(self.language_id, a.before + a.replaced + a.after):
                return False
        return self._tree_clean(text)

    def _tree_clean(self, text: str) -> bool:
        if self._parser is None:
            return True
        if self._base is None:
            self._base = _document_parse(self.language_id, self._head + self._old + self._tail)
        assert self._base is not None  # a parser, so a parse
        new = text.encode("utf-8")
        at, old_end = len(self._head), len(self._head) + len(self._old)
        tree = self._base.tree.copy()  # the cached tree stays the document's
        tree.edit(
            start_byte=at,
            old_end_byte=old_end,
            new_end_byte=at + len(new),
            start_point=self._at,
            old_end_point=positions.point_after(self._at, self._old),
            new_end_point=positions.point_after(self._at, new),
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


def fit(prefix: str, text: str, suffix: str, language_id: str, replaced: str = "") -> str:
    """The longest cut of text that adds no syntax error (`Check`) to the document prefix +
    replaced + suffix when put in place of replaced, or "" when every cut adds one: nothing
    shown may break the document.

    Cuts are at line ends and, on the first line, at word ends. The document is the whole of
    it, not a window: a window trimmed mid-string or mid-docstring has errors of its own, and a
    new error hides among them. A language without a grammar (or native parser) is not checked.
    """
    check = Check(Around(prefix, suffix, replaced), language_id)
    if not check.checked:
        return text
    cuts = [m.end() for m in _CUT.finditer(text.split("\n", 1)[0])]
    cuts += [i for i, c in enumerate(text) if c == "\n" and i > 0]
    for cut in sorted(set(cuts) | {len(text)}, reverse=True)[:24]:  # longest first
        if check.clean(text[:cut]):
            return text[:cut]
    return ""
