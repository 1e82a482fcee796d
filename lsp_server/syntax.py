"""Syntax services from tree-sitter: does a text parse, and where is the body of the function
around a position. Grammars come from the individual `tree-sitter-<lang>` wheels, so nothing is
downloaded at run time; a language without a wheel simply has no syntax services.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

from tree_sitter import Language, Node, Parser

from . import positions

# languageId -> (wheel module, its language function)
GRAMMARS: dict[str, tuple[str, str]] = {"python": ("tree_sitter_python", "language")}
FUNCTION_NODES: dict[str, frozenset[str]] = {
    "python": frozenset({"function_definition"}),
}


@cache
def parser_for(language_id: str) -> Parser | None:
    spec = GRAMMARS.get(language_id)
    if spec is None:
        return None
    try:
        module = importlib.import_module(spec[0])
    except ImportError:
        return None
    return Parser(Language(getattr(module, spec[1])()))


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
    """The body of the innermost function around offset, after its docstring if it has one."""
    parser = parser_for(language_id)
    kinds = FUNCTION_NODES.get(language_id)
    if parser is None or kinds is None:
        return None
    root = parser.parse(text.encode("utf-8")).root_node
    node = _enclosing(root, positions.byte_offset(text, offset), kinds)
    if node is None:
        node = _function_above_blank_line(text, offset, root, kinds)
    if node is None:
        return None
    body = node.child_by_field_name("body")
    name = node.child_by_field_name("name")
    if body is None or not body.named_children:
        return None
    stmts = body.named_children
    first = stmts[0]
    if _is_docstring(first):
        stmts = stmts[1:]
    start_byte = stmts[0].start_byte if stmts else first.end_byte
    start = positions.offset_from_byte(text, start_byte)
    line_start, _ = positions.line_at(text, start)
    indent_line = positions.line_at(text, positions.offset_from_byte(text, first.start_byte))
    line = text[indent_line[0] : indent_line[1]]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    if stmts and text[line_start:start].strip() == "":
        start = line_start  # regenerate whole lines, indentation included
    elif not stmts:
        nl = text.find("\n", start)
        start = len(text) if nl < 0 else nl + 1  # only a docstring: the body goes after it
    end = positions.offset_from_byte(text, body.end_byte) if stmts else start
    label = name.text.decode("utf-8", "replace") if name is not None and name.text else "?"
    return BodyHole(start, end, indent, label)


def _enclosing(root: Node, byte: int, kinds: frozenset[str]) -> Node | None:
    node: Node | None = root.descendant_for_byte_range(byte, byte)
    while node is not None and node.type not in kinds:
        node = node.parent
    return node


def _function_above_blank_line(
    text: str, offset: int, root: Node, kinds: frozenset[str]
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
    node = _enclosing(root, positions.byte_offset(text, before - 1), kinds)
    while node is not None and node.start_point.column >= column:
        node = node.parent  # the next function out
        while node is not None and node.type not in kinds:
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
