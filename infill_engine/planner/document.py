"""One plan's view of the document: its tree-sitter root, parsed at most once and only when a
grammar query is needed, and the grammar's captures near the cursor."""

from __future__ import annotations

from typing import Any


class DocumentView:
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
            self._root, self._parsed = root_of(self.text, self.language_id, self._tree), True
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


def root_of(text: str, language_id: str, tree: Any | None) -> Any | None:
    if tree is not None:
        return tree.root_node
    import grammars

    parser = grammars.parser(language_id)
    if parser is None:
        return None
    return parser.parse(text.encode("utf-8")).root_node
