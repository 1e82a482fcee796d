"""The training corpus of the builtin model: Python sources on this machine.

Two sources: `stdlib` (the CPython standard library) and `site-packages` (the pure-Python
sources of the installed packages, i.e. this project's dependencies). Owns file selection
(skipping tests, vendored copies of other packages, generated-looking files and anything
mentioning HumanEval, so the benchmark stays unseen), exact deduplication by content, and the
deterministic held-out split, decided by the SHA-1 of each file's path relative to its source
root (site-packages paths carry a `site-packages/` prefix, whichever directory they came from).
The key holds no Python version (`asyncio/tasks.py`, not `python3.11/asyncio/tasks.py`), so the
same stdlib files are held out on any machine and any Python. Held-out stdlib files are the
evaluation set; a site-packages file whose content equals a held-out file is dropped from
training.
"""

from __future__ import annotations

import hashlib
import site
import sysconfig
from collections.abc import Iterable, Sequence
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
# Vendored trees repeat other packages (pip's _vendor holds requests, rich, urllib3...).
VENDOR_DIR_NAMES = frozenset({"_vendor", "vendored", "_vendored", "extern"})


@dataclass(frozen=True)
class SourceFile:
    rel: str  # path relative to the corpus root, "/"-separated
    text: str


SOURCES = ("stdlib", "site-packages")


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def site_packages_root() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def site_packages_roots() -> list[Path]:
    """Every site-packages directory of this interpreter (purelib, platlib, site's list; a
    system Python may spread packages over several `dist-packages`), existing ones, no repeats."""
    paths = sysconfig.get_paths()
    found = [Path(paths["purelib"]), Path(paths["platlib"]), *map(Path, site.getsitepackages())]
    out: list[Path] = []
    for p in found:
        if p.is_dir() and all(p.resolve() != q.resolve() for q in out):
            out.append(p)
    return out


def _looks_generated(text: str) -> bool:
    """Data tables and minified code teach nothing about writing code."""
    lines = text.count("\n") + 1
    return len(text) / lines > 100 or max(map(len, text.split("\n"))) > 2000


def is_held_out(rel: str, heldout_percent: int = 3) -> bool:
    """Deterministic split: sha1(relative path) % 100 < heldout_percent."""
    digest = hashlib.sha1(rel.encode("utf-8")).hexdigest()
    return int(digest, 16) % 100 < heldout_percent


def _skip_path(rel_parts: tuple[str, ...]) -> bool:
    if any(p in SKIP_DIR_NAMES or p in VENDOR_DIR_NAMES for p in rel_parts[:-1]):
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
        if "humaneval" in text.lower() or _looks_generated(text):
            continue
        yield SourceFile("/".join(rel_parts), text.replace("\r\n", "\n"))


def split_corpus(
    root: Path | None = None,
    heldout_percent: int = 3,
    max_files: int | None = None,
    sources: tuple[str, ...] = ("stdlib",),
    package_mb: float | None = None,
    site_roots: Sequence[Path] | None = None,
) -> tuple[list[SourceFile], list[SourceFile]]:
    """(train, held_out) lists. With `root`, that one tree; else the named `sources` in order,
    site-packages from each of `site_roots` (default: `site_packages_root()` alone).

    Files are deduplicated by content (first one wins); held_out comes from the first source.
    `package_mb` caps what one top-level site-packages package contributes (a hash-ordered
    subset), so that one large dependency does not make up most of the corpus.
    """
    unknown = set(sources) - set(SOURCES)
    if unknown:
        raise ValueError(f"unknown corpus sources {sorted(unknown)}; known: {list(SOURCES)}")
    sites = list(site_roots) if site_roots is not None else [site_packages_root()]
    trees: list[tuple[Path | None, str]] = (
        [(root, "")]
        if root is not None
        else [
            (base, _prefix(s))
            for s in sources
            for base in ([stdlib_root()] if s == "stdlib" else sites)
        ]
    )
    train: list[SourceFile] = []
    held: list[SourceFile] = []
    seen: set[str] = set()
    for i, (base, prefix) in enumerate(trees):
        files = list(iter_sources(base))
        if prefix and package_mb is not None:
            files = _cap_packages(files, int(package_mb * 1e6))
        for f in files:
            digest = hashlib.sha1(f.text.encode("utf-8")).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            rel = prefix + f.rel
            if is_held_out(rel, heldout_percent):
                if i == 0:
                    held.append(SourceFile(rel, f.text))
            else:
                train.append(SourceFile(rel, f.text))
    if max_files is not None:
        train = train[:max_files]
    return train, held


def _cap_packages(files: list[SourceFile], cap: int) -> list[SourceFile]:
    def key(f: SourceFile) -> str:
        return hashlib.sha1(f.rel.encode("utf-8")).hexdigest()

    used: dict[str, int] = {}
    keep: set[str] = set()
    for f in sorted(files, key=key):
        package = f.rel.split("/", 1)[0]
        if used.get(package, 0) + len(f.text) <= cap:
            used[package] = used.get(package, 0) + len(f.text)
            keep.add(f.rel)
    return [f for f in files if f.rel in keep]


def _prefix(source: str) -> str:
    return "" if source == "stdlib" else source + "/"
