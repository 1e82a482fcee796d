"""Syntax services of the server: where is the body of the function around a position
(`function_body`, the hole of `dllm.fillFunctionBody`). tree-sitter serves every language with a
grammar; the grammars and their queries belong to the `grammars` package, and a language without
a grammar simply has no syntax services.

The syntax check that gates everything shown or applied (`Around`, `Check`, `fit`, `parses`,
`error_count`) belongs to the finishing steps in the engine package (infill_engine/finish/
syntax.py), so that `dllm-infill fill` checks as the server does: the server's modules import
it from there.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node, QueryCursor

import grammars
from infill_engine.finish.postprocess import Indent, detect_indent
from infill_engine.finish.syntax import parser_for

from ..workspace import positions

__all__ = [
    "BodyHole",
    "function_body",
]


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
