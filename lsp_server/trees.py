"""A document's tree-sitter tree, kept up to date incrementally.

Every text change is told to the tree with `tree.edit` (byte offsets and row/column points of
the old and new text); the reparse waits until someone asks for the tree, and then reuses every
subtree the edits did not touch. A burst of keystrokes costs one reparse, at the next planning,
and a reparse after a small edit costs a fraction of a full parse of a large file.
"""

from __future__ import annotations

from typing import Any

import grammars


def _point(text: str, offset: int) -> tuple[int, int]:
    """(row, byte column) of a str offset, as tree-sitter counts them."""
    row = text.count("\n", 0, offset)
    line_start = text.rfind("\n", 0, offset) + 1
    return row, len(text[line_start:offset].encode("utf-8"))


class IncrementalTree:
    def __init__(self, language_id: str, text: str) -> None:
        self.parser = grammars.parser(language_id)
        self._tree: Any | None = None
        self._stale = True
        self.reparses = 0

    def edit(self, old: str, start: int, end: int, new_text: str) -> None:
        """The text `old` had [start, end) replaced by `new_text` (str offsets)."""
        if self._tree is None:
            return  # nothing parsed yet: the first request parses the whole text
        new = old[:start] + new_text + old[end:]
        start_byte = len(old[:start].encode("utf-8"))
        self._tree.edit(
            start_byte=start_byte,
            old_end_byte=start_byte + len(old[start:end].encode("utf-8")),
            new_end_byte=start_byte + len(new_text.encode("utf-8")),
            start_point=_point(old, start),
            old_end_point=_point(old, end),
            new_end_point=_point(new, start + len(new_text)),
        )
        self._stale = True

    def reset(self) -> None:
        """The whole text was replaced: the next request parses from scratch."""
        self._tree, self._stale = None, True

    def current(self, text: str) -> Any | None:
        """The tree of `text` (the document's text after every edit told so far); None for a
        language without a grammar."""
        if self.parser is None:
            return None
        if self._stale or self._tree is None:
            data = text.encode("utf-8")
            self._tree = (
                self.parser.parse(data, self._tree)
                if self._tree is not None
                else self.parser.parse(data)
            )
            self._stale = False
            self.reparses += 1
        return self._tree
