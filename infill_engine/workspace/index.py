"""The workspace index: the workspace's source files, for drafts (docs/drafts.md).

- Built from the workspace folders the editor sends, on a daemon thread of its own (the event
  loop keeps answering, and shutdown never waits for it), the count of files done reported as
  it goes. Which files it reads, and how, is workspace/files.py: regular files under a root,
  nothing hidden or ignored, bounded reads.
- A budget for the whole build: `max_files`, `max_bytes` of text and `max_seconds`; what it left
  out is counted by reason (`status()`).
- Files are kept in pieces of PIECE_LINES lines (compressed). A lookup drafts from the pieces
  that hold the most of the cursor's keys (drafts/postings.py), at most postings.FILES of them,
  their lines indexed when first asked for and kept in a small cache: one lookup costs about
  the same in a two-million-line workspace as in a small one.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np

from infill_engine.drafts import Cursor, Draft, LineIndex, candidates, nearby
from infill_engine.drafts.imports import is_python
from infill_engine.drafts.postings import FILES, MAX_FILES, Postings, cursor_keys, file_keys

from .files import SOURCE_SUFFIXES, Rules, Skipped, read_text, rules_for, target_fault, under, walk

LIMIT = 8  # drafts sent with a call
PIECE_LINES = 400  # a file's lines per piece: a lookup reads at most FILES pieces
MARGIN = 16  # lines of context each side of a piece (a body under an opener at its end)
CACHED_LINES = 50_000  # lines of the line indices kept (some 20 MB), the least recent leaving
_KINDS = {s: i + 1 for i, s in enumerate(sorted(SOURCE_SUFFIXES))}  # 0: no file

__all__ = ["SOURCE_SUFFIXES", "WorkspaceIndex", "uri_path"]


def _pack(text: str) -> bytes:
    return zlib.compress(text.encode("utf-8"), 1)


def uri_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


@dataclass(frozen=True)
class Piece:
    """Up to PIECE_LINES lines of a file, with MARGIN lines of context each side: the unit a
    lookup reads, so that a long file costs no more than a short one."""

    path: Path
    offset: int  # the file's row where the piece's text starts
    keep: tuple[int, int]  # its rows that are candidates (the margins are context)
    text: bytes  # compressed


def pieces(text: str) -> list[tuple[int, str, tuple[int, int]]]:
    """(offset, text, keep) of each piece of a file's text."""
    lines = text.split("\n")
    out = []
    for start in range(0, len(lines), PIECE_LINES):
        lo, hi = max(0, start - MARGIN), min(len(lines), start + PIECE_LINES + MARGIN)
        end = min(start + PIECE_LINES, len(lines))
        out.append((lo, "\n".join(lines[lo:hi]), (start - lo, end - lo)))
    return out


class WorkspaceIndex:
    """The workspace's source files in pieces, by number: their texts, their keys
    (drafts/postings.py), and line indices (drafts.LineIndex) of those a lookup asks for."""

    def __init__(
        self,
        max_files: int = 20_000,
        max_file_bytes: int = 512 * 1024,
        max_bytes: int = 256 << 20,
        max_seconds: float = 30.0,
        exclude: Sequence[str] = (),
    ) -> None:
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.exclude = tuple(exclude)
        self._pieces: list[Piece | None] = []  # by number; None: free
        self._kinds = np.zeros(0, dtype=np.int8)  # each piece's suffix (_KINDS), 0 when free
        self._numbers: dict[Path, list[int]] = {}  # a file's pieces
        self._sizes: dict[Path, tuple[int, int]] = {}  # a file's (lines, characters)
        self._free: list[int] = []  # numbers of pieces gone, to reuse
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
        parts: list[Piece | None] = []
        kinds: list[int] = []
        numbers: dict[Path, list[int]] = {}
        sizes: dict[Path, tuple[int, int]] = {}
        keys = []
        skipped, stopped, total = Skipped(), None, 0
        for rule in rules:
            for path in walk(rule, skipped, cancel):
                if time.monotonic() - t0 > self.max_seconds:
                    stopped = "time"
                    break
                if path in numbers:
                    continue  # a symlink inside the root to a file already read
                if len(numbers) >= self.max_files or total >= self.max_bytes:
                    skipped["over_budget"] += 1
                    continue
                text, why = read_text(path, self.max_file_bytes)
                if text is None:
                    skipped[why or "unreadable"] += 1
                    continue
                split = pieces(text)
                if len(parts) + len(split) > MAX_FILES:
                    skipped["over_budget"] += 1
                    continue
                numbers[path] = list(range(len(parts), len(parts) + len(split)))
                for offset, piece, keep in split:
                    keys.append((len(parts), file_keys(piece, is_python(path.name))))
                    parts.append(Piece(path, offset, keep, _pack(piece)))
                    kinds.append(_KINDS[path.suffix])
                total += len(text)
                sizes[path] = (text.count("\n") + 1, len(text))
                if report is not None and len(numbers) % 200 == 0:
                    report(len(numbers))
            if stopped is not None:
                break
        if cancel is not None and cancel.is_set():
            return len(numbers)
        postings = Postings.build(keys)
        with self._lock:
            self._pieces, self._numbers, self._sizes, self._free = parts, numbers, sizes, []
            self._kinds = np.asarray(kinds, dtype=np.int8)
            self._postings, self._rules = postings, rules
            self._cache, self._cached_lines = OrderedDict(), 0
            self.skipped, self.stopped, self.ready = skipped, stopped, True
            self.build_s = time.monotonic() - t0
        return len(numbers)

    # -- keeping it up to date ---------------------------------------------------------------------
    def covers(self, path: Path) -> bool:
        """Whether `path` (resolved) belongs in the index: a source file under a root, passing
        the root's rules (workspace/files.py)."""
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
        python = is_python(path.name)
        split = [(o, piece, keep, file_keys(piece, python)) for o, piece, keep in pieces(text)]
        with self._lock:
            if path not in self._numbers and len(self._numbers) >= self.max_files:
                return False
            self._drop(path)
            if len(self._pieces) - len(self._free) + len(split) > MAX_FILES:
                return False
            numbers = []
            for offset, piece, keep, keys in split:
                n = self._free.pop() if self._free else self._grow()
                self._pieces[n] = Piece(path, offset, keep, _pack(piece))
                self._kinds[n] = _KINDS[path.suffix]
                self._postings.update(n, keys)
                numbers.append(n)
            self._numbers[path] = numbers
            self._sizes[path] = (text.count("\n") + 1, len(text))
        return True

    def remove(self, path: Path) -> None:
        with self._lock:
            self._drop(Path(os.path.realpath(path)))

    def _grow(self) -> int:
        self._pieces.append(None)
        self._kinds = np.append(self._kinds, np.int8(0))
        return len(self._pieces) - 1

    def _drop(self, path: Path) -> None:
        """Forget a file's pieces (under the lock)."""
        for n in self._numbers.pop(path, ()):
            self._pieces[n] = None
            self._kinds[n] = 0
            self._postings.update(n, None)
            if (gone := self._cache.pop(n, None)) is not None:
                self._cached_lines -= len(gone.lines)
            self._free.append(n)
        self._sizes.pop(path, None)

    # -- drafts ------------------------------------------------------------------------------------
    def drafts(self, uri: str, text: str, offset: int, limit: int = LIMIT) -> list[Draft]:
        """Lines of the other indexed files of the same kind for the cursor at `offset` of the
        document `uri` (never its own copy on disk), best first."""
        own = uri_path(uri)
        own = Path(os.path.realpath(own)) if own is not None else None
        suffix = own.suffix if own is not None else ".py"  # an untitled document: Python's
        kind = _KINDS.get(suffix, 0)
        near = nearby(text, offset)  # drafts read the document's rows around the cursor
        cur = Cursor.at(near.text, near.offset, python=is_python(suffix))
        with self._lock:
            keep = self._kinds == kind
            for n in self._numbers.get(own, ()) if own is not None else ():
                keep[n] = False
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
            piece = self._pieces[number]
        if piece is None:
            return None
        text = zlib.decompress(piece.text).decode("utf-8")
        index = LineIndex.build(
            str(piece.path), "workspace", text, keep=piece.keep, offset=piece.offset
        )
        with self._lock:
            if self._pieces[number] is piece and number not in self._cache:  # not changed since
                self._cache[number] = index
                self._cached_lines += len(index.lines)
                while self._cached_lines > CACHED_LINES and len(self._cache) > 1:
                    self._cached_lines -= len(self._cache.popitem(last=False)[1].lines)
        return index

    def paths(self) -> frozenset[Path]:
        """The files indexed now, by their resolved paths: a copy, to read."""
        with self._lock:
            return frozenset(self._numbers)

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {
                "ready": self.ready,
                "files": len(self._numbers),
                "lines": sum(n for n, _ in self._sizes.values()),
                "bytes": sum(c for _, c in self._sizes.values()),
                "skipped": sum(self.skipped.values()),
                "skipped_by": dict(sorted(self.skipped.items())),
                "stopped": self.stopped,
                "build_s": round(self.build_s, 3),
                # pieces read back for lookups and kept decoded (at most CACHED_LINES lines)
                "cached": {"pieces": len(self._cache), "lines": self._cached_lines},
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
