"""The part of a document that drafting reads: the rows within NEAR_ROWS of the cursor's.

Every step of drafting from the document reads it line by line: its index of lines (lines.py),
the cursor's names, imports and block (`Cursor.at`), the functions that own each name
(strangers.py), and the workspace's lookup reads the cursor again. Read whole, a request's cost
grew with the document (`gather` alone: 3.4 ms for 1,000 lines of Python, 73 ms for 29,000,
131 ms for 58,000 lines, 1.7 MB, on one core of a 2-core CPU), and the language server takes
documents up to `context.maxDocumentChars`, 2 MB. Within these rows it stays near 11 ms
whatever the document's size.

A document of at most 2 x NEAR_ROWS + 1 rows is read whole, so nothing changes there. In a
longer one, a line beyond them is not drafted from (the workspace's index never drafts a
document from its own copy on disk), and a name used only beyond them is not known to the
cursor. The cursor's block head was looked for at most 2,000 rows up already
(lines.MAX_SCOPE_ROWS).
"""

from __future__ import annotations

from dataclasses import dataclass

NEAR_ROWS = 2000  # rows read above the cursor's row, and as many below


@dataclass(frozen=True)
class Nearby:
    text: str  # the rows read, whole lines
    offset: int  # the cursor, a str offset into text
    row: int  # the document's row where text starts


def row_start(text: str, offset: int, up: int = 0) -> int:
    """Where the row `up` rows above the one that holds `offset` starts (0 past the first)."""
    lo = offset
    for _ in range(up + 1):  # back past the newline before each row, the cursor's first
        lo = text.rfind("\n", 0, lo)
        if lo < 0:
            return 0
    return lo + 1


def nearby(text: str, offset: int, rows: int = NEAR_ROWS) -> Nearby:
    """The rows of `text` within `rows` of the row that holds `offset`."""
    lo = row_start(text, offset, rows)  # 0: none was cut above
    hi = offset
    for _ in range(rows + 1):  # on to the newline after each row, the cursor's first
        hi = text.find("\n", hi)
        if hi < 0:
            break
        hi += 1
    hi = len(text) if hi < 0 else hi - 1  # the end of the last row kept, its newline left out
    if lo == 0 and hi == len(text):
        return Nearby(text, offset, 0)
    return Nearby(text[lo:hi], offset - lo, text.count("\n", 0, lo))
