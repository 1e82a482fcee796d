"""Identifiers, and how much two sets of them (or of lines) overlap: the one definition that the
drafts (lines.py, bodies.py, imports.py) and the language server's chunks of other files
(lsp_server/workspace/crossfile.py) share."""

from __future__ import annotations

import re
from collections.abc import Set

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a name, in the syntax of most languages

# Keywords and builtin type names of the grammar languages: words of the language, nobody's own
# name (a rename never maps them, a shape keeps them, no function owns them).
_KEYWORDS = """
    and as assert async await break case catch class const continue def default defer del do elif
    else enum except export extends final finally fn for from func function go if impl import in
    interface is let loop match mod module mut new nil none not null or package pass private
    protected pub public raise return self static struct super switch this throw throws trait try
    type typedef union unsafe use var void where while with yield true false True False None
    string number boolean object any unknown never undefined symbol bigint int float double char
    long short bool byte str bytes usize isize u8 u16 u32 u64 i8 i16 i32 i64 f32 f64 uint size_t
    error rune float32 float64 int8 int16 int32 int64 uint8 uint16 uint32 uint64 uintptr
"""
KEYWORDS = frozenset(_KEYWORDS.split())


def jaccard(a: Set[str], b: Set[str]) -> float:
    """The Jaccard index of two sets: what they share over what either holds; 0 when either is
    empty."""
    return len(a & b) / len(a | b) if a and b else 0.0
