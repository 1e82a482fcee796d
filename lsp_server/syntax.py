"""Syntax services from tree-sitter: does a text parse, and where is the body of the function
around a position. The grammars and their queries belong to the `grammars` package (the
individual `tree-sitter-<lang>` wheels, so nothing is downloaded at run time); a language
without a grammar simply has no syntax services.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node, Parser, QueryCursor

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


def error_count(text: str, language_id: str) -> int | None:
    """Error and missing nodes in the parse of text; None for a language without a grammar."""
    parser = parser_for(language_id)
    if parser is None:
        return None
    root = parser.parse(text.encode("utf-8")).root_node
    if not root.has_error:
        return 0
    n, stack = 0, [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            n += 1
        stack.extend(c for c in node.children if c.has_error or c.is_missing)
    return n


_CUT = re.compile(r"\w+|\S")  # ends of words and symbols: where a single line may be cut


def fit(prefix: str, text: str, suffix: str, language_id: str) -> str:
    """The longest cut of text that adds no syntax error to prefix + suffix, or "" when every
    cut adds one: nothing shown may break the document.

    Cuts are at line ends and, on the first line, at word ends. prefix + suffix (a window of the
    document) may not parse on its own, so a cut is clean when it has no more ERROR and MISSING
    nodes than the window without any insertion. A language without a grammar is not checked.
    """
    if parser_for(language_id) is None:
        return text
    before = error_count(prefix + suffix, language_id) or 0
    cuts = [m.end() for m in _CUT.finditer(text.split("\n", 1)[0])]
    cuts += [i for i, c in enumerate(text) if c == "\n" and i > 0]
    for cut in sorted(set(cuts) | {len(text)}, reverse=True)[:24]:  # longest first
        if (error_count(prefix + text[:cut] + suffix, language_id) or 0) <= before:
            return text[:cut]
    return ""
