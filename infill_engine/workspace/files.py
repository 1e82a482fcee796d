"""The workspace's files as hostile input: which of them the index may read, and reading them.

A workspace is often a repository someone else wrote, cloned as it is: it can hold symlinks to
devices, to FIFOs or to files outside it, files that never end, hidden files holding keys and
`.gitignore` files of any size. The rules, each one a test in tests/lsp/test_workspace_fuzz.py:

- Only regular files whose resolved path stays under a workspace root are read (a symlink
  inside the root to a file inside the root is read once, under its resolved path).
- Never a hidden file or folder (a name starting with "."), nor `SKIP_DIRS`, nor what a
  `.gitignore` names (each folder's own file, the deepest that decides wins, as in git), nor the
  editor's exclude patterns (`files.exclude`, `drafts.exclude`).
- A file is opened non-blocking and without following a final symlink, then checked with
  `fstat`: a FIFO or a device swapped in after the walk is refused, never waited on. At most
  `limit + 1` bytes are read: a larger file is refused without reading the rest.
- A `.gitignore` is read by the same rules; past `MAX_IGNORE_PATTERNS` patterns in all, a folder
  whose `.gitignore` would exceed them is left out whole (matching is linear in the patterns).
- What is left out is counted by reason (`Skipped`), for the editor's progress and `dllm/status`.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})
SOURCE_SUFFIXES = frozenset(
    {".py", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".c", ".h", ".cc", ".cpp", ".hpp"}
)
MAX_IGNORE_BYTES = 256 * 1024  # a larger .gitignore is not a hand-written one
MAX_IGNORE_PATTERNS = 2000  # in all the workspace's .gitignore files
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | _NO_FOLLOW

# Why a file was left out (Skipped's keys).
REASONS = (
    "hidden",  # a hidden file (hidden folders are not entered, and not counted)
    "ignored",  # named by a .gitignore or an exclude pattern
    "outside",  # a symlink whose target is outside every root
    "not_regular",  # a FIFO, socket, device or folder where a file was expected
    "unreadable",  # the OS refused it (permissions, a symlink swapped in, a broken link or loop)
    "too_large",  # over max_file_bytes
    "not_text",  # NUL bytes or not UTF-8
    "over_budget",  # past max_files or max_bytes
    "ignore_file",  # a folder left out whole: its .gitignore was past the limits
)


class Skipped(Counter[str]):
    """Files left out, by reason (REASONS)."""


def read_regular(path: Path, limit: int) -> tuple[bytes | None, str | None]:
    """(the bytes of `path`, None), or (None, why not) where it is not a regular file of at most
    `limit` bytes that the OS lets us open. Never blocks on a FIFO or a device."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):  # where a resolved path was expected: a loop, or swapped in
            return None, "unreadable"
        if not stat.S_ISREG(mode):
            return None, "not_regular"
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as e:
        return None, "not_regular" if e.errno == errno.ENXIO else "unreadable"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not_regular"
        if st.st_size > limit:
            return None, "too_large"
        parts, left = [], limit + 1
        while left > 0:  # the size said may be wrong (a file growing): read to limit + 1 at most
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
    except OSError:
        return None, "unreadable"
    finally:
        os.close(fd)
    data = b"".join(parts)
    return (None, "too_large") if len(data) > limit else (data, None)


def read_text(path: Path, limit: int) -> tuple[str | None, str | None]:
    """read_regular, decoded: (text, None) or (None, why not)."""
    data, why = read_regular(path, limit)
    if data is None:
        return None, why
    if b"\0" in data:
        return None, "not_text"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "not_text"


def hidden(name: str) -> bool:
    return name.startswith(".")


@dataclass
class Rules:
    """What the index leaves out under one root: the `.gitignore` file of each folder (by its path
    relative to the root, "" for the root itself) and the editor's exclude patterns."""

    root: Path
    exclude: pathspec.PathSpec
    ignores: dict[str, pathspec.PathSpec] = field(default_factory=dict)
    patterns: int = 0  # the .gitignore patterns read so far, against MAX_IGNORE_PATTERNS
    # folders left out whole (their .gitignore past the limits): what is under them stays out,
    # reached through a symlink or an update too
    left_out: set[str] = field(default_factory=set)

    def load(self, rel_dir: str, skipped: Skipped) -> bool:
        """Read the folder's own `.gitignore`, if any; False when the folder must be left out
        whole (its .gitignore is past the limits)."""
        path = self.root / rel_dir / ".gitignore" if rel_dir else self.root / ".gitignore"
        if not os.path.lexists(path):
            return True
        text, why = read_text(path, MAX_IGNORE_BYTES)
        if text is None:
            skipped["ignore_file"] += 1
            if why == "unreadable" and not os.path.exists(path):  # a broken link: no rules
                return True
            self.left_out.add(rel_dir)
            return False
        lines = [s for line in text.splitlines() if (s := line.strip()) and not s.startswith("#")]
        if self.patterns + len(lines) > MAX_IGNORE_PATTERNS:
            skipped["ignore_file"] += 1
            self.left_out.add(rel_dir)
            return False
        self.patterns += len(lines)
        self.ignores[rel_dir] = pathspec.GitIgnoreSpec.from_lines(lines)
        return True

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        """Whether the path `rel` (relative to the root, "/"-separated) is left out: the deepest
        .gitignore with a pattern that matches decides, then the exclude patterns; all of a
        folder left out whole."""
        name = rel + "/" if is_dir else rel
        if self.exclude.match_file(name):
            return True
        parts = rel.split("/")
        if any("/".join(parts[:depth]) in self.left_out for depth in range(len(parts) + 1)):
            return True
        for depth in range(len(parts) - 1, -1, -1):
            spec = self.ignores.get("/".join(parts[:depth]))
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            verdict = spec.check_file(sub).include
            if verdict is not None:
                return verdict
        return False


def rules_for(root: Path, exclude: Sequence[str]) -> Rules:
    return Rules(root, pathspec.GitIgnoreSpec.from_lines(list(exclude)))


def under(path: Path, roots: Sequence[Path]) -> Path | None:
    """The root `path` (resolved) lies under, or None."""
    for root in roots:
        if path == root or root in path.parents:
            return root
    return None


def walk(
    rules: Rules,
    skipped: Skipped,
    cancel: threading.Event | None = None,
) -> Iterator[Path]:
    """The resolved paths of the source files under `rules.root` that the index may read; what
    is left out counted in `skipped`. Stops when `cancel` is set. Symlinks come last: their
    targets are checked once every folder's .gitignore is loaded."""
    root = rules.root
    links: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):  # never follows a symlinked folder
        if cancel is not None and cancel.is_set():
            return
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        if not rules.load(rel_dir, skipped):
            dirnames[:] = []
            continue
        keep = []
        for d in dirnames:
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if not hidden(d) and d not in SKIP_DIRS and not rules.ignored(rel, is_dir=True):
                keep.append(d)
        dirnames[:] = sorted(keep)
        for name in sorted(filenames):
            if os.path.splitext(name)[1] not in SOURCE_SUFFIXES:
                continue
            if hidden(name):
                skipped["hidden"] += 1
                continue
            if rules.ignored(f"{rel_dir}/{name}" if rel_dir else name):
                skipped["ignored"] += 1
                continue
            full = os.path.join(dirpath, name)
            path = Path(os.path.realpath(full))
            if path != Path(full):
                links.append(path)
                continue
            yield path
    for path in links:  # a symlink's target must pass the same rules
        if cancel is not None and cancel.is_set():
            return
        if (why := target_fault(rules, path)) is not None:
            skipped[why] += 1
            continue
        yield path


def target_fault(rules: Rules, path: Path) -> str | None:
    """Why a symlink's resolved target may not be read, or None: it must stay under the same
    root, and be neither hidden, in a skipped folder, nor ignored there."""
    if under(path, [rules.root]) is None:
        return "outside"
    rel = path.relative_to(rules.root).as_posix()
    parts = rel.split("/")
    if any(hidden(p) for p in parts) or any(p in SKIP_DIRS for p in parts[:-1]):
        return "hidden"
    if any(rules.ignored("/".join(parts[:i]), is_dir=True) for i in range(1, len(parts))):
        return "ignored"
    return "ignored" if rules.ignored(rel) else None
