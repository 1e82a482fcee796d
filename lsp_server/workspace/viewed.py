"""The documents the user has looked at last: a bounded ring of excerpts around the cursor.

A next-edit prompt (the model's, a hosted edit API's) carries what the user has just read
elsewhere, as Zeta's and Copilot's do: the last MAX_ENTRIES documents seen, each as at most
MAX_LINES lines and MAX_CHARS characters around where the cursor was. A document is seen when it
is opened, focused, or asked about (an inline completion, a next edit); seeing it again replaces
its excerpt and makes it the newest. What a prompt gets never includes the document it is for.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

MAX_ENTRIES = 8
MAX_LINES = 40  # around the cursor: half before, half after
MAX_CHARS = 4000
MAX_URI_CHARS = 2000  # a longer uri is no document an editor opened


@dataclass(frozen=True)
class Excerpt:
    uri: str
    text: str  # whole lines, unless one line was longer than MAX_CHARS
    line: int  # the 0-based line of the document where `text` begins


def excerpt(text: str, offset: int) -> tuple[str, int]:
    """At most MAX_LINES lines of text around `offset` (a str offset: half of them above its
    line), cut to the MAX_CHARS characters nearest it; and the line where they begin."""
    offset = max(0, min(offset, len(text)))
    start = text.rfind("\n", 0, offset) + 1
    for _ in range(MAX_LINES // 2):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    end = offset
    for _ in range(MAX_LINES - MAX_LINES // 2):  # the cursor's line and those below
        found = text.find("\n", end)
        end = len(text) if found < 0 else found + 1
        if found < 0:
            break
    if end - start > MAX_CHARS:  # long lines: the characters nearest the cursor
        start = max(start, min(offset - MAX_CHARS // 2, end - MAX_CHARS))
        end = start + MAX_CHARS
    return text[start:end], text.count("\n", 0, start)


class Viewed:
    """The ring of excerpts, newest last."""

    def __init__(self, limit: int = MAX_ENTRIES) -> None:
        self.limit = limit
        self._seen: OrderedDict[str, Excerpt] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def saw(self, uri: str, text: str, offset: int | None) -> None:
        """The user looked at `text` (the document `uri`) around `offset`; None: where they
        looked last (the document's start the first time)."""
        if len(uri) > MAX_URI_CHARS:
            return
        last = self._seen.pop(uri, None)
        if offset is None and last is not None:
            self._seen[uri] = last
        else:
            body, line = excerpt(text, offset or 0)
            self._seen[uri] = Excerpt(uri, body, line)
        while len(self._seen) > self.limit:
            self._seen.popitem(last=False)

    def forget(self, uri: str) -> None:
        self._seen.pop(uri, None)

    def recent(self, exclude: str | None = None) -> list[Excerpt]:
        """The excerpts, oldest first (as History.edits() and the prompts have them), less the
        one of `exclude` (the document asked about)."""
        return [e for uri, e in self._seen.items() if uri != exclude]
