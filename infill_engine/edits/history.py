"""A document's recent edits, as a person would name them: the keystrokes of one word or one
line coalesced into one edit, the oldest forgotten first, every text bounded.

The language server feeds it every applied `didChange` (lsp_server/workspace/documents.py); the
next-edit candidates (structure.py, rewrite.py) and the hosted edit engine read it. An edit keeps
its own text and the rest of the lines it touched, so what it changed on those lines can be read
again without keeping the document as it was.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

MAX_EDITS = 16  # per document: Zeta's and Copilot's prompts carry about this many
MAX_EDIT_CHARS = 2000  # an edit's old or new text past this is kept as its ends only
MAX_LINE_CHARS = 400  # the rest of a touched line kept on either side of the edit


@dataclass(frozen=True)
class Edit:
    """`old` replaced by `new` at `start`, a str offset into the text after the edit (kept up to
    date while later edits move it); `head` and `tail`: the rest of the lines the edit touched,
    before and after it (the same in the text before the edit and after it); `clipped`: old or
    new was too long and is kept as its ends only (its offsets no longer add up)."""

    start: int
    old: str
    new: str
    head: str = ""
    tail: str = ""
    clipped: bool = False

    @property
    def end(self) -> int:
        """Where `new` ends in the text after the edit."""
        return self.start + len(self.new)

    @property
    def lines_before(self) -> str:
        """The whole lines the edit touched, as they were."""
        return self.head + self.old + self.tail

    @property
    def lines_after(self) -> str:
        """The same lines as they are now."""
        return self.head + self.new + self.tail

    def moved(self, delta: int) -> Edit:
        return replace(self, start=self.start + delta)


def replacement(old: str, new: str) -> tuple[int, int, str] | None:
    """The smallest replacement turning `old` into `new`: (start, end, text) within `old`, their
    common prefix and suffix left out; None when they are equal. Compared a block at a time, so
    a large text costs little."""
    if old == new:
        return None
    n, head = min(len(old), len(new)), 0
    while head + _BLOCK <= n and old[head : head + _BLOCK] == new[head : head + _BLOCK]:
        head += _BLOCK
    while head < n and old[head] == new[head]:
        head += 1
    tail, most = 0, n - head
    while (
        tail + _BLOCK <= most
        and old[len(old) - tail - _BLOCK : len(old) - tail]
        == new[len(new) - tail - _BLOCK : len(new) - tail]
    ):
        tail += _BLOCK
    while tail < most and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head, len(old) - tail, new[head : len(new) - tail]


_BLOCK = 256


def _clip(text: str) -> tuple[str, bool]:
    if len(text) <= MAX_EDIT_CHARS:
        return text, False
    half = MAX_EDIT_CHARS // 2
    return text[:half] + text[-half:], True


def _around(text: str, start: int, end: int) -> tuple[str, str]:
    """The rest of the lines of text[start:end]: the head before it, the tail after it."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    head = text[max(line_start, start - MAX_LINE_CHARS) : start]
    return head, text[end : min(line_end, end + MAX_LINE_CHARS)]


class History:
    """One document's recent edits, oldest first. `record` is told each change as it is applied:
    the text before it, the span it replaced and what it put there."""

    def __init__(self, limit: int = MAX_EDITS) -> None:
        self._edits: deque[Edit] = deque(maxlen=limit)

    def __len__(self) -> int:
        return len(self.edits())

    def edits(self) -> list[Edit]:
        """The edits, oldest first; one typed and taken back (old == new) is none."""
        return [e for e in self._edits if e.old != e.new]

    @property
    def last(self) -> Edit | None:
        kept = self.edits()
        return kept[-1] if kept else None

    def clear(self) -> None:
        self._edits.clear()

    def record(self, text: str, start: int, end: int, inserted: str) -> None:
        """text[start:end] is replaced by `inserted` (text is the document before the change)."""
        if start == end and not inserted:
            return
        delta = len(inserted) - (end - start)
        after = text[:start] + inserted + text[end:]
        last = self._edits.pop() if self._edits else None
        merged = _merge(last, text, start, end, inserted) if last is not None else None
        # every kept edit wholly after the change moves with it; one it overlaps stays put
        kept = [e.moved(delta) if e.start >= end else e for e in self._edits]
        self._edits.clear()
        self._edits.extend(kept)
        if merged is None:
            if last is not None:
                self._edits.append(last.moved(delta) if last.start >= end else last)
            old, new = text[start:end], inserted
            clipped = False
        else:
            start, old, new, clipped = merged
        # typed and taken back (old == new): kept, so that typing on grows it, but no edit
        head, tail = _around(after, start, start + len(new))
        old, c1 = _clip(old)
        new, c2 = _clip(new)
        self._edits.append(Edit(start, old, new, head, tail, clipped or c1 or c2))


def _merge(
    last: Edit, text: str, start: int, end: int, inserted: str
) -> tuple[int, str, str, bool] | None:
    """The last edit grown by a change on its lines (typing on, deleting back into it, changing
    the same line again), as (start, old, new, clipped); None when a line break lies between
    them (a change elsewhere is an edit of its own)."""
    if last.clipped:
        return None
    lo, hi = min(start, last.start), max(end, last.end)
    if "\n" in text[lo : last.start] or "\n" in text[last.end : hi]:
        return None
    old = text[lo : last.start] + last.old + text[last.end : hi]
    if start >= last.end:  # after it on its line
        new = last.new + text[last.end : start] + inserted
    elif end <= last.start:  # before it
        new = inserted + text[end : last.start] + last.new
    else:  # over it
        a, b = max(start, last.start) - last.start, min(end, last.end) - last.start
        new = last.new[:a] + inserted + last.new[b:]
    return lo, old, new, False
