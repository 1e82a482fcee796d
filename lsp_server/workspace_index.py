"""The workspace index: the lines of the workspace's source files, for drafts (docs/drafts.md).

- Built from the workspace folders the editor sends, on a thread of its own (the event loop
  keeps answering), with the count of files done reported as it goes.
- Honours `.gitignore` files (the root's and nested ones, with pathspec's gitignore rules) and
  skips hidden folders, `node_modules`, files over `max_file_bytes`, files that are not UTF-8
  and everything past `max_files`: memory stays bounded.
- Kept up to date one file at a time: `update` on a save or a watched-file change, `remove` on
  a deletion.
- Drafts for a document never come from that document's copy on disk, which the editor's
  buffer has overtaken: the engine drafts from the buffer itself (infill_engine/drafts/).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

import pathspec

from infill_engine.drafts import Cursor, Draft, LineIndex, candidates

SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})
SOURCE_SUFFIXES = frozenset(
    {".py", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".c", ".h", ".cc", ".cpp", ".hpp"}
)
LIMIT = 8  # drafts sent with a call


def uri_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


class WorkspaceIndex:
    """The line indices (drafts.LineIndex) of the workspace's source files, by path."""

    def __init__(self, max_files: int = 20_000, max_file_bytes: int = 512 * 1024) -> None:
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self._files: dict[Path, LineIndex] = {}
        self._roots: list[tuple[Path, pathspec.PathSpec]] = []
        self._lock = threading.Lock()
        self.ready = False
        self.skipped = 0  # files left out: too large, not text, or past max_files

    # -- building ----------------------------------------------------------------------------------
    def build(
        self,
        folders: Sequence[Path],
        report: Callable[[int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> int:
        """Index every source file under `folders` (on the caller's thread); the files indexed.
        `report(n)` is called every 200 files."""
        files: dict[Path, LineIndex] = {}
        roots = [(f.resolve(), _ignores(f.resolve())) for f in folders if f.is_dir()]
        skipped = 0
        for root, spec in roots:
            for path in _walk(root, spec):
                if cancel is not None and cancel.is_set():
                    return len(files)
                if len(files) >= self.max_files:
                    skipped += 1
                    continue
                index = self._read(path)
                if index is None:
                    skipped += 1
                    continue
                files[path] = index
                if report is not None and len(files) % 200 == 0:
                    report(len(files))
        with self._lock:
            self._files, self._roots, self.skipped, self.ready = files, roots, skipped, True
        return len(files)

    def _read(self, path: Path) -> LineIndex | None:
        try:
            if path.stat().st_size > self.max_file_bytes:
                return None
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        return LineIndex.build(str(path), "workspace", text)

    # -- keeping it up to date ---------------------------------------------------------------------
    def covers(self, path: Path) -> bool:
        """Whether `path` belongs in the index: a source file under a root, not ignored."""
        if path.suffix not in SOURCE_SUFFIXES:
            return False
        for root, spec in self._roots:
            try:
                rel = path.relative_to(root)
            except ValueError:
                continue
            parts = rel.parts
            if any(p.startswith(".") or p in SKIP_DIRS for p in parts[:-1]):
                return False
            return not spec.match_file(rel.as_posix())
        return False

    def update(self, path: Path) -> bool:
        """Read `path` again (saved or changed on disk); False when it is not indexed."""
        path = path.resolve()
        if not self.ready or not self.covers(path):
            return False
        index = self._read(path)
        with self._lock:
            if index is None:
                self._files.pop(path, None)
                return False
            if path not in self._files and len(self._files) >= self.max_files:
                return False
            self._files[path] = index
        return True

    def remove(self, path: Path) -> None:
        with self._lock:
            self._files.pop(path.resolve(), None)

    # -- drafts ------------------------------------------------------------------------------------
    def drafts(self, uri: str, text: str, offset: int, limit: int = LIMIT) -> list[Draft]:
        """Lines of the other indexed files of the same kind for the cursor at `offset` of the
        document `uri` (never its own copy on disk), best first."""
        own = uri_path(uri)
        own = own.resolve() if own is not None else None
        suffix = own.suffix if own is not None else ".py"
        with self._lock:
            indices = [i for p, i in self._files.items() if p != own and p.suffix == suffix]
        if not indices:
            return []
        return candidates(Cursor.at(text, offset), indices, limit)

    def status(self) -> dict[str, int | bool]:
        with self._lock:
            lines = sum(len(i.lines) for i in self._files.values())
            return {"ready": self.ready, "files": len(self._files), "lines": lines,
                    "skipped": self.skipped}  # fmt: skip


def _ignores(root: Path) -> pathspec.PathSpec:
    """The root's `.gitignore` and the nested ones, each pattern anchored at its own folder."""
    lines: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS]
        if ".gitignore" not in filenames:
            continue
        base = Path(dirpath).relative_to(root).as_posix()
        try:
            raw = (Path(dirpath) / ".gitignore").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in raw.splitlines():
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            lines.append(s if base == "." else _nested(base, s))
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _nested(base: str, pattern: str) -> str:
    """A nested .gitignore's pattern, relative to the root."""
    negate = pattern.startswith("!")
    p = pattern[1:] if negate else pattern
    anchored = "/" in p.rstrip("/")
    p = f"{base}/{p.lstrip('/')}" if anchored else f"{base}/**/{p}"
    return ("!" if negate else "") + p


def _walk(root: Path, spec: pathspec.PathSpec) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        keep = []
        for d in dirnames:
            rel = (rel_dir / d).as_posix()
            if d.startswith(".") or d in SKIP_DIRS or spec.match_file(rel + "/"):
                continue
            keep.append(d)
        dirnames[:] = sorted(keep)
        for name in sorted(filenames):
            rel = (rel_dir / name).as_posix()
            if Path(name).suffix in SOURCE_SUFFIXES and not spec.match_file(rel):
                yield Path(dirpath) / name
