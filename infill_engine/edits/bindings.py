"""Names and where they are bound, as the structure rules and inline completion read them: an
edit that renamed a name (every token it changed one name replaced by another, the same each
time), and whether a name is bound where it stands, with the scope its binding holds in
(tree-sitter: a parameter's function; a local's block where the language scopes names by
block, else its function; none for a name bound at the top).

The next-edit rename rule (structure.py) proposes a renamed binding's other references; inline
completion reads the same renames (renames.py), so that a name just renamed is the name used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .history import Edit
from .text import Token, changes, is_name, tokens

# A node's type's last word -> the fields that bind a name there: declarations, definitions and
# assignments (not a binary expression's left side, which is read, not bound).
_BINDS = {
    "declaration": ("name", "left", "pattern", "declarator"),
    "definition": ("name", "declarator"),
    "declarator": ("name", "declarator"),
    "item": ("name", "pattern"),
    "spec": ("name",),
    "assignment": ("left",),
    "statement": ("left",),
}

_SCOPES = ("function", "method", "lambda", "closure", "constructor")
# Where a declared name ends in languages that scope names by block: a block, a case, or a
# statement whose header declares it (`if err := f(); ...`, `for (int i = 0; ...)`).
_BLOCKS = ("block", "compound_statement", "statement_block", "match_arm", "catch_clause")
_HEADED = {"if", "for", "while", "switch", "select"}


def renaming(
    ops: Sequence[tuple[str, int, int, int, int]], before: Sequence[Token], after: Sequence[Token]
) -> tuple[str, str] | None:
    """(old, new) when every change is one name replaced by another, the same each time."""
    pairs = set()
    for tag, i1, i2, j1, j2 in ops:
        if tag != "replace" or i2 - i1 != 1 or j2 - j1 != 1:
            return None
        old, new = before[i1].text, after[j1].text
        if not (is_name(old) and is_name(new)):
            return None
        pairs.add((old, new))
    return pairs.pop() if len(pairs) == 1 else None


def renamed_by(edit: Edit) -> tuple[str, str] | None:
    """(old, new) when `edit` renamed one name on its lines (`renaming` of its tokens)."""
    return renaming(changes(edit), tokens(edit.lines_before), tokens(edit.lines_after))


def binding(
    text: str, offset: int, tree: Any | None, blocks: bool = True
) -> tuple[bool, tuple[int, int] | None]:
    """(whether the name at offset is bound there, the str span of the scope a parameter or a
    local binding lives in: its block where the language scopes by block, unless not
    `blocks`, else its function); (False, None) without a tree."""
    if tree is None:
        return False, None
    data_prefix = len(text[:offset].encode("utf-8"))
    node = tree.root_node.descendant_for_byte_range(data_prefix, data_prefix)
    if node is None:
        return False, None
    bound, chain, n, params, decl = False, list[Any](), node, None, None
    while n is not None and len(chain) < 6:
        chain.append(n)
        n = n.parent
    for depth, anc in enumerate(chain[1:4], start=1):
        child = chain[depth - 1]
        if "parameter" in anc.type:
            bound, params = True, anc
            break
        fields = _BINDS.get(anc.type.split("_")[-1], ())
        for field in fields:
            f = anc.child_by_field_name(field)
            if f is not None and f.start_byte <= child.start_byte and child.end_byte <= f.end_byte:
                bound, decl = True, anc
                break
        if bound or fields:
            # A binding node whose binding fields do not hold the name holds it in its value
            # (`p = strchr(s, c)`: strchr is read, not bound, however high the declaration).
            break
    if not bound:
        return False, None
    if blocks and (block := _block_of(decl)) is not None:
        return True, _span(text, block)
    scope = node.parent
    while scope is not None and not _is_scope(scope.type):
        scope = scope.parent
    if scope is None and params is not None:
        scope = params.parent  # a prototype's parameter: its name means nothing past it
        while scope is not None and "parameter" in scope.type:
            scope = scope.parent
    if scope is None:
        return True, None
    named = scope.child_by_field_name("name")
    if named is not None and named.start_byte <= node.start_byte < named.end_byte:
        return True, None  # the function's own name: its references are outside it
    return True, _span(text, scope)


def _span(text: str, node: Any) -> tuple[int, int]:
    """A node's span as str offsets of `text` (its tree's bytes are UTF-8)."""
    data = text.encode("utf-8")
    return (len(data[: node.start_byte].decode("utf-8", "replace")),
            len(data[: node.end_byte].decode("utf-8", "replace")))  # fmt: skip


def _block_of(decl: Any | None) -> Any | None:
    """The block a declared name lives in, in the languages that scope names by block: the
    nearest block or control statement above its declaration (an `if` or `for` whose header
    declares it), within its function. None for any other binding: an assignment (`x = 1`
    binds a name declared elsewhere, and Python has no declarations), a JavaScript `var`."""
    if decl is None or not ("declar" in decl.type or decl.type.endswith(("_item", "_spec"))):
        return None
    n = decl.parent
    if "variable_declaration" in (decl.type, getattr(n, "type", None)):
        return None  # JavaScript's `var`: its function's
    while n is not None and not _is_scope(n.type):
        if n.type in _BLOCKS or n.type.endswith("_case") or set(n.type.split("_")) & _HEADED:
            return n
        n = n.parent
    return None


def _is_scope(kind: str) -> bool:
    """A function-like node (not its declarator or its parameters)."""
    return any(k in kind for k in _SCOPES) and not any(k in kind for k in ("declarator", "param"))
