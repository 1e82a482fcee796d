"""Which of many files can hold drafts for a cursor, in time that does not grow with their number.

Scoring every line of a two-million-line workspace for each keystroke took a minute. But a line
can be a draft only where its file holds one of the cursor's keys: the line above or below the
cursor (equal, or of the same shape: lines.shape), the start of what is typed, or, in a block of
imports, a name the document uses. So each file is summarised by the hashes of those keys that
it holds, and one sorted array of (hash, file) pairs for all files answers a cursor's keys with
one binary search each. The files that hold the most of them, at most `FILES`, are the ones
drafted from (lines.candidates); with no more files than that, all are.

Memory: one int64 a distinct key per file, the hash's high 44 bits above the file's number (20
bits: at most 2**20 files). A false match costs one more file looked at, never a wrong draft.
Files changed after the build are kept apart (`_fresh`) and merged in once there are `MERGE`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np

from .imports import imported_names
from .lines import Cursor, shape

FILES = 8  # pieces drafted from per lookup (as good as all of them: docs/drafts.md)
MERGE = 256  # files changed since the build kept apart, before they are merged in
FILE_BITS = 20
MAX_FILES = 1 << FILE_BITS
PREFIXES = (1, 2, 4, 8, 16)  # starts of lines kept, for what is typed (the longest that fits)
MAX_NAMES = 64  # names of the document asked for, in a block of imports

_TEXT, _SHAPE, _START, _IMPORT = (np.uint64(0x5BD1E995 * k) for k in (1, 2, 3, 4))
_HASH_MASK = np.uint64((1 << (64 - FILE_BITS)) - 1)
_SIGN = np.uint64(1 << 63)


def _pack(texts: Iterable[str], tag: np.uint64) -> np.ndarray:
    """The keys of `texts` under `tag`: each hash's high 44 bits above 20 zero bits for a file's
    number, its sign bit flipped so that int64 order is the hashes' order."""
    h = np.fromiter((hash(t) for t in texts), dtype=np.int64).view(np.uint64)
    return ((((h ^ tag) & _HASH_MASK) << np.uint64(FILE_BITS)) ^ _SIGN).view(np.int64)


def file_keys(text: str, python: bool = True) -> np.ndarray:
    """The distinct keys a file holds (not yet combined with its number); the names its
    imports bind only when it is Python (`python`)."""
    distinct = {s for line in text.split("\n") if (s := line.strip())}
    shapes = {sh for s in distinct if (sh := shape(s)) != s}
    starts = {s[:k] for s in distinct for k in PREFIXES if len(s) >= k}
    imports = {
        name
        for s in distinct
        if python and s.startswith(("import ", "from "))
        for name in imported_names(s)
    }
    parts = (
        _pack(distinct, _TEXT),
        _pack(shapes, _SHAPE),
        _pack(starts, _START),
        _pack(imports, _IMPORT),
    )
    return np.unique(np.concatenate(parts))


def cursor_keys(cur: Cursor) -> tuple[list[int], list[float]]:
    """The keys a cursor asks for, and what a file holding each one is worth."""
    keys: list[int] = []
    weights: list[float] = []

    def ask(tag: np.uint64, s: str, weight: float) -> None:
        keys.append(int(_pack((s,), tag)[0]))
        weights.append(weight)

    for near, weight in ((cur.prev, 2.0), (cur.next, 2.0), (cur.prev2, 1.0)):
        if near:
            sh = shape(near)
            ask(_TEXT, near, weight)
            ask(_TEXT, sh, weight / 2)  # a line without literals is its own shape
            ask(_SHAPE, sh, weight / 2)
    if cur.typed:
        k = max(p for p in PREFIXES if p <= len(cur.typed))
        ask(_START, cur.typed[:k], 1.0 + k / 8)
    if cur.in_imports:
        for name in sorted(cur.used - cur.imported)[:MAX_NAMES]:
            ask(_IMPORT, name, 1.0)
    return keys, weights


class Postings:
    """The keys of many files (numbered 0 to MAX_FILES - 1), looked up together."""

    def __init__(self) -> None:
        self._base = np.empty(0, dtype=np.int64)  # sorted: key | file
        self._in_base: set[int] = set()  # the files _base speaks for
        self._fresh: dict[int, np.ndarray] = {}  # file -> its keys, for files changed since
        self._gone: set[int] = set()  # files of _base changed or removed since
        self._lock = threading.Lock()

    @classmethod
    def build(cls, files: Iterable[tuple[int, np.ndarray]]) -> Postings:
        """From (file, file_keys) pairs."""
        out = cls()
        out._merge(dict(files))
        return out

    def update(self, file: int, keys: np.ndarray | None) -> None:
        """A file's keys anew (None: it is gone)."""
        if not 0 <= file < MAX_FILES:
            raise ValueError(f"file number {file} is out of range")
        with self._lock:
            if file in self._in_base:
                self._gone.add(file)
            self._fresh.pop(file, None)
            if keys is not None:
                self._fresh[file] = keys
            if len(self._fresh) + len(self._gone) >= MERGE:
                self._merge(self._fresh)

    def _merge(self, fresh: dict[int, np.ndarray]) -> None:
        base = self._base
        if self._gone:
            gone = np.fromiter(self._gone, dtype=np.int64)
            base = base[~np.isin(base & (MAX_FILES - 1), gone)]
        parts = [base] + [keys | f for f, keys in fresh.items()]
        merged = np.concatenate(parts) if len(parts) > 1 else base.copy()
        merged.sort()
        self._in_base = (self._in_base - self._gone) | set(fresh)
        self._base, self._fresh, self._gone = merged, {}, set()

    def best(
        self, keys: Sequence[int], weights: Sequence[float], keep: np.ndarray, limit: int = FILES
    ) -> list[int]:
        """The files that hold the most of `keys` by weight, best first, at most `limit`; only
        files `keep` (a bool per file number) marks, and none that hold no key."""
        if not keys or not len(keep):
            return []
        q = np.asarray(keys, dtype=np.int64)
        w = np.asarray(weights, dtype=np.float64)
        among = len(keep)
        with self._lock:
            base, fresh, gone = self._base, dict(self._fresh), list(self._gone)
        lo = np.searchsorted(base, q, "left")
        hi = np.searchsorted(base, q + (MAX_FILES - 1), "right")
        score = np.zeros(among, dtype=np.float64)
        for i in np.flatnonzero(hi > lo):
            files = base[lo[i] : hi[i]] & (MAX_FILES - 1)  # distinct: a key once per file
            score[files[files < among]] += w[i]
        for f in gone:
            if f < among:
                score[f] = 0.0
        for f, fkeys in fresh.items():
            if f < among:
                score[f] = float(w[np.isin(q, fkeys)].sum())
        score[~keep] = 0.0
        hits = np.flatnonzero(score > 0)
        if len(hits) > limit:
            hits = hits[np.argpartition(-score[hits], limit - 1)[:limit]]
        return [int(f) for f in hits[np.argsort(-score[hits], kind="stable")]]
