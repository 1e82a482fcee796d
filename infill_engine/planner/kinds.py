"""The planner's vocabulary: the kinds of hole and the encode function it measures with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

HoleKind = Literal[
    "line", "expression", "statement", "block_body", "function_body", "empty_body", "selection"
]
KINDS: tuple[str, ...] = (
    "line",
    "expression",
    "statement",
    "block_body",
    "function_body",
    "empty_body",
    "selection",
)

Encode = Callable[[str], list[int]]
