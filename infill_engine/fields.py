"""The checks of one field of a message, a settings object or a model's config: the one place that
says a bool is not a number (JSON's and msgpack's `true` is Python's `True`, an `int`).

Our own small module, not msgspec, pydantic or cattrs: each caller keeps its own error type and
wording (`BadRequest` naming the field in the service, a warning per settings key in
lsp_server/options.py, `ValueError` in the dataclasses), checks one field at a time where a
library validates a whole class at once, and must not convert ("12" -> 12, 3.7 -> 3) where it
refuses; and the language server imports this without loading a validation library. The
predicates (`is_int`, `is_number`, `is_finite`, `is_id`) answer; `int_in`, `number_in` and `flag`
raise `error(message)`, the message starting with the field's name (none when `name` is "",
where the caller names it).
"""

from __future__ import annotations

import sys
from typing import Any, TypeGuard

_FLOAT_MAX = sys.float_info.max


def is_int(v: object) -> TypeGuard[int]:
    """An int, not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: object) -> TypeGuard[int | float]:
    """An int or a float, not a bool (nan and inf are floats)."""
    return isinstance(v, int | float) and not isinstance(v, bool)


def is_finite(v: object) -> TypeGuard[int | float]:
    """A number a float holds: not inf or nan, nor an int past a float's range (a 400-digit JSON
    integer, on which isfinite() and float() overflow)."""
    return is_number(v) and -_FLOAT_MAX <= v <= _FLOAT_MAX


def is_id(v: object) -> TypeGuard[int | str]:
    """A message id: an int (not a bool) or a string, as JSON-RPC's and the service's are."""
    return isinstance(v, str) or is_int(v)


def _named(name: str, what: str) -> str:
    return f"{name} {what}" if name else what


def int_in(raw: Any, name: str, lo: int, hi: int, error: type[Exception] = ValueError) -> int:
    """`raw` as an int in [lo, hi]; `error("NAME must be an int in [LO, HI]")` if not."""
    if not is_int(raw) or not lo <= raw <= hi:
        raise error(_named(name, f"must be an int in [{lo}, {hi}]"))
    return raw


def number_in(
    raw: Any,
    name: str,
    lo: float,
    hi: float,
    error: type[Exception] = ValueError,
    above: bool = False,
) -> float:
    """`raw`, a finite number in [lo, hi] (in (lo, hi] with `above`), as a float;
    `error("NAME must be a number in [LO, HI]")` if not."""
    if not is_finite(raw) or not (lo < raw if above else lo <= raw) or not raw <= hi:
        raise error(_named(name, f"must be a number in {'(' if above else '['}{lo:g}, {hi:g}]"))
    return float(raw)


def flag(raw: Any, name: str, error: type[Exception] = ValueError) -> bool:
    """`raw`, a bool; `error("NAME must be true or false")` if not."""
    if not isinstance(raw, bool):
        raise error(_named(name, "must be true or false"))
    return raw
