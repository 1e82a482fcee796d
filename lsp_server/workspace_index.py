"""The workspace index: the workspace's source files, for drafts (docs/drafts.md).

- Built from the workspace folders the editor sends, on a daemon thread of its own (the event
  loop keeps answering, and shutdown never waits for it), the count of files done reported as
  it goes. Which files it reads, and how, is workspace_files.py: regular files under a root,
  nothing hidden or ignored, bounded reads.
- A budget for the whole build: `max_files`, `max_bytes` of text and `max_seconds`; what it left
  out is counted by reason (`status()`).
- A lookup drafts from the files that hold the most of the cursor's keys (drafts/postings.py),
  at most postings.FILES of them, each file's lines indexed when first asked for and kept in a
  small cache: one lookup costs about the same in a two-million-line workspace as in a small
  one.
- Kept up to date one file at a time: `update` on a save or a watched-file change, `remove` on
  a deletion.
- Drafts for a document never come from that document's copy on disk, which the editor's
  buffer has overtaken: the engine drafts from the buffer itself (infill_engine/drafts/).
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np

from infill_engine.drafts import Cursor, Draft, LineIndex, candidates
from infill_engine.drafts.postings import FILES, MAX_FILES, Postings, cursor_keys, file_keys

from .workspace_files import (
    SOURCE_SUFFIXES,
    Rules,
    Skipped,
    read_text,
    rules_for,
    target_fault,
    under,
    walk,
)

LIMIT = 8  # drafts sent with a call
CACHED_LINES = 50_000  # lines of the line indices kept (some 20 MB), the least recent leaving
_KINDS = {s: i + 1 for i, s in enumerate(sorted(SOURCE_SUFFIXES))}  # 0: no file

__all__ = ["SOURCE_SUFFIXES", "WorkspaceIndex", "uri_path"]


def _pack(text: str) -> bytes:
    return zlib.compress(text.encode("utf-8"), 1)


def uri_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


class WorkspaceIndex:
    """The texts of the workspace's source files by number, their keys (drafts/postings.py), and
    line indices (drafts.LineIndex) of those a lookup asks for."""

    def __init__(
        self,
        max_files: int = 20_000,
        max_file_bytes: int = 512 * 1024,
        max_bytes: int = 256 << 20,
        max_seconds: float = 30.0,
        exclude: Sequence[str] = (),
    ) -> None:
        self.max_files = min(max_files, MAX_FILES)
        self.max_file_bytes = max_file_bytes
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.exclude = tuple(exclude)
        # by file number, compressed (a quarter of the memory; a lookup reads a few): None, removed
        self._texts: list[bytes | None] = []
        self._paths: list[Path] = []
        self._numbers: dict[Path, int] = {}
        self._kinds = np.zeros(0, dtype=np.int8)  # each file's suffix (_KINDS), 0 when removed
        self._sizes: list[tuple[int, int]] = []  # by file number: (lines, characters)
        self._lines = 0
        self._bytes = 0
        self._postings = Postings()
        self._rules: list[Rules] = []
        self._cache: OrderedDict[int, LineIndex] = OrderedDict()
        self._cached_lines = 0
        self._lock = threading.Lock()
        self.ready = False
        self.skipped = Skipped()
        self.stopped: str | None = None  # "time" when the budget's seconds ran out
        self.build_s = 0.0

    # -- building ----------------------------------------------------------------------------------
    def build(
        self,
        folders: Sequence[Path],
        report: Callable[[int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> int:
        """Index the source files under `folders` (on the caller's thread); the files indexed.
        `report(n)` is called every 200 files."""
        t0 = time.monotonic()
        roots = [f.resolve() for f in folders if f.is_dir()]
        rules = [rules_for(r, self.exclude) for r in roots]
        texts: list[bytes | None] = []
        paths: list[Path] = []
        numbers: dict[Path, int] = {}
        kinds: list[int] = []
        keys = []
        sizes: list[tuple[int, int]] = []
        skipped, stopped, total = Skipped(), None, 0
        for rule in rules:
            for path in walk(rule, skipped, cancel):
                if time.monotonic() - t0 > self.max_seconds:
                    stopped = "time"
                    break
                if path in numbers:
                    continue  # a symlink inside the root to a file already read
                if len(texts) >= self.max_files or total >= self.max_bytes:
                    skipped["over_budget"] += 1
                    continue
                text, why = read_text(path, self.max_file_bytes)
                if text is None:
                    skipped[why or "unreadable"] += 1
                    continue
                numbers[path] = len(texts)
                keys.append((len(texts), file_keys(text)))
                texts.append(_pack(text))
                paths.append(path)
                kinds.append(_KINDS[path.suffix])
                total += len(text)
                sizes.append((text.count("\n") + 1, len(text)))
                if report is not None and len(texts) % 200 == 0:
                    report(len(texts))
            if stopped is not None:
                break
        if cancel is not None and cancel.is_set():
            return len(texts)
        postings = Postings.build(keys)
        with self._lock:
            self._texts, self._paths, self._numbers = texts, paths, numbers
            self._kinds = np.asarray(kinds, dtype=np.int8)
            self._postings, self._rules = postings, rules
            self._cache, self._cached_lines = OrderedDict(), 0
            self._sizes, self._bytes = sizes, total
            self._lines = sum(n for n, _ in sizes)
            self.skipped, self.stopped, self.ready = skipped, stopped, True
            self.build_s = time.monotonic() - t0
        return len(texts)

    # -- keeping it up to date ---------------------------------------------------------------------
    def covers(self, path: Path) -> bool:
        """Whether `path` (resolved) belongs in the index: a source file under a root, passing
        the root's rules (workspace_files.py)."""
        if path.suffix not in SOURCE_SUFFIXES:
            return False
        root = under(path, [r.root for r in self._rules])
        rules = next((r for r in self._rules if r.root == root), None)
        return rules is not None and target_fault(rules, path) is None

    def update(self, path: Path) -> bool:
        """Read `path` again (saved or changed on disk); False when it is not indexed."""
        path = Path(os.path.realpath(path))
        if not self.ready or not self.covers(path):
            return False
        text, _ = read_text(path, self.max_file_bytes)
        if text is None:
            self.remove(path)
            return False
        keys = file_keys(text)
        with self._lock:
            number = self._numbers.get(path)
            if number is None:
                live = len(self._numbers)
                if live >= self.max_files or len(self._texts) >= MAX_FILES:
                    return False
                number = len(self._texts)
                self._texts.append(None)
                self._sizes.append((0, 0))
                self._paths.append(path)
                self._kinds = np.append(self._kinds, np.int8(0))
                self._numbers[path] = number
            self._set(number, _pack(text), _KINDS[path.suffix], text.count("\n") + 1, len(text))
            self._postings.update(number, keys)
        return True

    def remove(self, path: Path) -> None:
        with self._lock:
            number = self._numbers.pop(Path(os.path.realpath(path)), None)
            if number is not None:
                self._set(number, None, 0, 0, 0)
                self._postings.update(number, None)

    def _set(self, number: int, text: bytes | None, kind: int, lines: int, chars: int) -> None:
        self._lines += lines - self._sizes[number][0]
        self._bytes += chars - self._sizes[number][1]
        self._sizes[number] = (lines, chars)
        self._texts[number] = text
        self._kinds[number] = kind
        if (gone := self._cache.pop(number, None)) is not None:
            self._cached_lines -= len(gone.lines)

    # -- drafts ------------------------------------------------------------------------------------
    def drafts(self, uri: str, text: str, offset: int, limit: int = LIMIT) -> list[Draft]:
        """Lines of the other indexed files of the same kind for the cursor at `offset` of the
        document `uri` (never its own copy on disk), best first."""
        own = uri_path(uri)
        own = Path(os.path.realpath(own)) if own is not None else None
        kind = _KINDS.get(own.suffix if own is not None else ".py", 0)
        cur = Cursor.at(text, offset)
        with self._lock:
            keep = self._kinds == kind
            if own is not None and (mine := self._numbers.get(own)) is not None:
                keep[mine] = False
        count = int(keep.sum())
        if count == 0:
            return []
        if count <= FILES:
            chosen = [int(n) for n in np.flatnonzero(keep)]
        else:
            keys, weights = cursor_keys(cur)
            chosen = self._postings.best(keys, weights, keep, FILES)
        indices = [i for n in chosen if (i := self._line_index(n)) is not None]
        return candidates(cur, indices, limit) if indices else []

    def _line_index(self, number: int) -> LineIndex | None:
        with self._lock:
            if (cached := self._cache.get(number)) is not None:
                self._cache.move_to_end(number)
                return cached
            text, path = self._texts[number], self._paths[number]
        if text is None:
            return None
        index = LineIndex.build(str(path), "workspace", zlib.decompress(text).decode("utf-8"))
        with self._lock:
            if self._texts[number] is text and number not in self._cache:  # not changed meanwhile
                self._cache[number] = index
                self._cached_lines += len(index.lines)
                while self._cached_lines > CACHED_LINES and len(self._cache) > 1:
                    self._cached_lines -= len(self._cache.popitem(last=False)[1].lines)
        return index

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {
                "ready": self.ready,
                "files": len(self._numbers),
                "lines": self._lines,
                "bytes": self._bytes,
                "skipped": sum(self.skipped.values()),
                "skipped_by": dict(sorted(self.skipped.items())),
                "stopped": self.stopped,
                "build_s": round(self.build_s, 3),
            }

    def summary(self) -> str:
        """One line for the editor: what was indexed, and what was left out and why."""
        s = self.status()
        out = f"{s['files']} files indexed"
        if s["skipped"]:
            out += "; left out: " + ", ".join(f"{n} {k}" for k, n in s["skipped_by"].items())
        if s["stopped"] == "time":
            out += f"; stopped at the {self.max_seconds:g} s budget"
        return out
