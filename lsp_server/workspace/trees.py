"""A document's tree-sitter tree, kept up to date incrementally.

Every text change is told to the tree with `tree.edit` (byte offsets and row/column points of
the old and new text); the reparse waits until someone asks for the tree, and then reuses every
subtree the edits did not touch. A burst of keystrokes costs one reparse, at the next planning,
and a reparse after a small edit costs a fraction of a full parse of a large file.
"""

from __future__ import annotations

from typing import Any

import grammars

from .positions import byte_offset, point_at


class IncrementalTree:
    def __init__(self, language_id: str) -> None:
        self.parser = grammars.parser(language_id)
        self._tree: Any | None = None
        self._stale = True
        self.reparses = 0

    def edit(self, old: str, start: int, end: int, new_text: str) -> None:
        """The text `old` had [start, end) replaced by `new_text` (str offsets)."""
        if self._tree is None:
            return  # nothing parsed yet: the first request parses the whole text
        new = old[:start] + new_text + old[end:]
        self._tree.edit(
            start_byte=byte_offset(old, start),
            old_end_byte=byte_offset(old, end),
            new_end_byte=byte_offset(new, start + len(new_text)),
            start_point=point_at(old, start),
            old_end_point=point_at(old, end),
            new_end_point=point_at(new, start + len(new_text)),
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
