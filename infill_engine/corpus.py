"""The training corpus of the builtin model: Python sources of the CPython standard library.

Owns file selection (skipping tests, site-packages and anything mentioning HumanEval, so the
benchmark stays unseen) and the deterministic held-out split, decided by the SHA-1 of each
file's path relative to the stdlib root. The same interpreter version gives the same corpus on
any machine.
"""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SKIP_DIR_NAMES = frozenset(
    {
        "test",
        "tests",
        "idle_test",
        "site-packages",
        "dist-packages",
        "__pycache__",
        "lib2to3",
        "turtledemo",
        "ensurepip",
        "venv",
    }
)


@dataclass(frozen=True)
class SourceFile:
    rel: str  # path relative to the corpus root, "/"-separated
    text: str


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def is_held_out(rel: str, heldout_percent: int = 3) -> bool:
    """Deterministic split: sha1(relative path) % 100 < heldout_percent."""
    digest = hashlib.sha1(rel.encode("utf-8")).hexdigest()
    return int(digest, 16) % 100 < heldout_percent


def _skip_path(rel_parts: tuple[str, ...]) -> bool:
    if any(p in SKIP_DIR_NAMES for p in rel_parts[:-1]):
        return True
    name = rel_parts[-1]
    return name.startswith("test_") or "humaneval" in "/".join(rel_parts).lower()


def iter_sources(
    root: Path | None = None, max_bytes: int = 400_000, min_bytes: int = 200
) -> Iterable[SourceFile]:
    """All usable .py files under root (default: the stdlib), sorted by relative path."""
    base = root if root is not None else stdlib_root()
    paths = sorted(base.rglob("*.py"), key=lambda p: p.relative_to(base).as_posix())
    for path in paths:
        rel_parts = path.relative_to(base).parts
        if _skip_path(rel_parts) or not path.is_file():
            continue
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        if not (min_bytes <= len(raw) <= max_bytes):
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if "humaneval" in text.lower():
            continue
        yield SourceFile("/".join(rel_parts), text.replace("\r\n", "\n"))


def split_corpus(
    root: Path | None = None, heldout_percent: int = 3, max_files: int | None = None
) -> tuple[list[SourceFile], list[SourceFile]]:
    """(train, held_out) lists, each sorted by relative path."""
    train: list[SourceFile] = []
    held: list[SourceFile] = []
    for f in iter_sources(root):
        (held if is_held_out(f.rel, heldout_percent) else train).append(f)
    if max_files is not None:
        train = train[:max_files]
    return train, held
