"""The typed-ahead cache: while the user types the start of the completion just shown, the rest
of it is answered from here without calling the model.

One entry per document (uri) remembers where the last completion was asked for and what came
back. A position is recognised by the length of the text before the cursor plus its last
_TAIL characters, and by the same for the text after the cursor, so each keystroke compares
a few kilobytes, not the whole document. An edit far from the cursor that keeps both lengths
could therefore pass unnoticed; it would not change the completion's text.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

_TAIL = 2000


@dataclass(frozen=True)
class _Entry:
    before_tail: str
    before_len: int
    after_head: str
    after_len: int
    completions: tuple[str, ...]


def _same_after(entry: _Entry, after: str) -> bool:
    return len(after) == entry.after_len and after.startswith(entry.after_head)


def _typed(entry: _Entry, before: str) -> str | None:
    """What was typed since the entry was made, or None when before does not extend it."""
    typed_len = len(before) - entry.before_len
    longest = max(map(len, entry.completions))
    if typed_len < 0 or typed_len > longest:
        return None
    tail_start = entry.before_len - len(entry.before_tail)
    if not before.startswith(entry.before_tail, tail_start):
        return None
    return before[entry.before_len :]


def _remainders(completions: Sequence[str], typed: str) -> list[str]:
    rests = (c[len(typed) :] for c in completions if c.startswith(typed))
    return list(dict.fromkeys(rest for rest in rests if rest.strip()))


class TypeaheadCache:
    """At most `size` documents' last completions, the least recently remembered evicted first."""

    def __init__(self, size: int = 32) -> None:
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        self.size = size
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def remember(self, uri: str, before: str, after: str, completions: Sequence[str]) -> None:
        """Store the completions shown at this position, replacing the uri's previous ones."""
        self._entries.pop(uri, None)
        kept = tuple(c for c in completions if c)
        if not kept or self.size == 0:
            return
        self._entries[uri] = _Entry(before[-_TAIL:], len(before), after[:_TAIL], len(after), kept)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def lookup(self, uri: str, before: str, after: str) -> list[str] | None:
        """The rest of each stored completion the user has typed the start of, or None."""
        found = self._find(uri, before, after)
        if found:
            self.hits += 1
            return found
        self.misses += 1
        return None

    def _find(self, uri: str, before: str, after: str) -> list[str] | None:
        entry = self._entries.get(uri)
        if entry is None or not _same_after(entry, after):
            return None
        typed = _typed(entry, before)
        return None if typed is None else _remainders(entry.completions, typed)

    def clear(self, uri: str | None = None) -> None:
        """Forget one document's entry, or every entry."""
        if uri is None:
            self._entries.clear()
        else:
            self._entries.pop(uri, None)
