"""What an edit would overwrite: nothing the user wrote (blank lines, comments, a placeholder
such as `pass`, `...`, `todo!()`, `raise NotImplementedError`, `{}`), or working code.

The commands fill an empty or stub body at once, and ask before they replace code the user did
not select (`needs_confirmation`). Placeholders are languages' data: `grammars/<lang>/stubs.scm`
captures them as `@stub`; a comment, an empty statement, and a block or expression statement
holding only stubs are stubs in every language. A language without a grammar knows no stubs:
anything but whitespace there is code.
"""

from __future__ import annotations

from tree_sitter import Node, QueryCursor

import grammars

from ..workspace import positions

# Nodes that are stubs when everything named inside them is (`{}`, `;`, `todo!();`, Go's list).
_CONTAINERS = frozenset(
    {
        "block",
        "statement_block",
        "compound_statement",
        "statement_list",
        "expression_statement",
        "empty_statement",
    }
)


def holds_code(text: str, start: int, end: int, language_id: str) -> bool:
    """Whether text[start:end] (str offsets) holds anything but whitespace, comments and the
    language's placeholders."""
    if not text[start:end].strip():
        return False
    parser, query = grammars.parser(language_id), grammars.query(language_id, "stubs")
    if parser is None or query is None:
        return True
    root = parser.parse(text.encode("utf-8")).root_node
    lo, hi = positions.byte_offset(text, start), positions.byte_offset(text, end)
    cursor = QueryCursor(query)
    cursor.set_byte_range(lo, hi)
    stubs = {n.id for n in cursor.captures(root).get("stub", [])}
    return _code_in(root, lo, hi, stubs)


def needs_confirmation(
    text: str, start: int, end: int, language_id: str, chosen: tuple[int, int] | None = None
) -> bool:
    """Whether replacing text[start:end] overwrites code outside `chosen`, the range the user
    selected for it (None: a cursor, nothing chosen)."""
    if chosen is None:
        return holds_code(text, start, end, language_id)
    a, b = chosen
    before = start < a and holds_code(text, start, min(a, end), language_id)
    return before or (end > b and holds_code(text, max(b, start), end, language_id))


def _code_in(node: Node, lo: int, hi: int, stubs: set[int]) -> bool:
    """Whether the bytes [lo, hi) under node hold code: a child wholly inside that is no stub,
    or a token the range cuts."""
    for child in node.children:
        if child.end_byte <= lo or child.start_byte >= hi:
            continue
        if lo <= child.start_byte and child.end_byte <= hi:
            if not _is_stub(child, stubs):
                return True
        elif child.child_count == 0 or _code_in(child, lo, hi, stubs):
            return True
    return False


def _is_stub(node: Node, stubs: set[int]) -> bool:
    if node.id in stubs or "comment" in node.type:
        return True
    if not node.is_named:
        return node.type in (";", "{", "}")
    return node.type in _CONTAINERS and all(_is_stub(c, stubs) for c in node.children)
