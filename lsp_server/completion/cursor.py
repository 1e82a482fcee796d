"""Where the cursor is, for the rules of automatic completion: inside a comment or a string
(no automatic suggestion there: the user is writing prose), read from the document's own
tree-sitter tree. A language without a grammar has no tree, and every position is code.
"""

from __future__ import annotations

from typing import Any

from ..workspace.positions import byte_offset

# Code inside a string: an f-string's `{...}`, a template literal's `${...}`.
_CODE_IN_STRING = frozenset({"interpolation", "template_substitution"})


def in_comment_or_string(tree: Any | None, text: str, offset: int) -> bool:
    """Whether the cursor at `offset` (a str offset into text, the tree's text) is inside a
    comment or a string literal.

    The node holding the character before the cursor decides. A line comment runs to the end
    of its line, so the cursor at its end is still in it (the user is typing the comment); a
    block comment or string is left once its closing delimiter is behind the cursor.
    """
    if tree is None or offset <= 0:
        return False
    b = byte_offset(text, offset)
    node = tree.root_node.descendant_for_byte_range(b - 1, b)
    while node is not None:
        kind = node.type
        if kind in _CODE_IN_STRING:
            return False
        if "comment" in kind:
            closed = node.end_byte == b and (node.text or b"").endswith(b"*/")
            return not closed
        if ("string" in kind or kind == "char_literal") and node.start_byte < b < node.end_byte:
            return True
        node = node.parent
    return False
