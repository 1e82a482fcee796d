"""Identifiers, and how much two sets of them (or of lines) overlap: the one definition that the
drafts (lines.py, bodies.py, imports.py) and the language server's chunks of other files
(lsp_server/workspace/crossfile.py) share."""

from __future__ import annotations

import re
from collections.abc import Set

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a name, in the syntax of most languages


def jaccard(a: Set[str], b: Set[str]) -> float:
    """The Jaccard index of two sets: what they share over what either holds; 0 when either is
    empty."""
    return len(a & b) / len(a | b) if a and b else 0.0
