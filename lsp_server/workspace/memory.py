"""Giving memory back to the system when a large document closes.

Serving a document costs memory in proportion to its size, and most of it is short-lived: each
edit copies the text, each request parses it with tree-sitter and compiles it with CPython's
own compiler (an AST of hundreds of MiB for a 5 MB file), and the syntax check keeps the last few
documents and their trees for the candidates of one request (infill_engine/finish/syntax.py).
Freed, that memory stays in glibc malloc's heap, so a 5 MB file opened, edited and closed left
the server at twice its resident size. `release` drops the syntax caches and, after closing a
document of `LARGE_CHARS` or more, collects cycles and asks glibc to return its free pages
(`malloc_trim`, glibc only: elsewhere the collection alone runs).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
from collections.abc import Callable

from infill_engine.finish.syntax import forget_documents

LARGE_CHARS = 1_000_000  # a closed document this long is worth a collection and a trim


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS, Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def release(closed_chars: int) -> None:
    """After a document of `closed_chars` characters closed: the caches go, and for a large
    one the freed heap goes back to the system too."""
    forget_documents()
    if closed_chars < LARGE_CHARS:
        return
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
