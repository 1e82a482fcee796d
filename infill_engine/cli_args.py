"""The command line's numbers, checked where argparse reads them: one argparse type per kind of
option, each built on fields.py's checks, so that `fill`, `bench` and the rest refuse a bad value
with the same one line (`argument --threshold: must be a number in (0, 1], got '2'`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from .fields import int_in, number_in

BIG = 1 << 20  # no span or count of the command line comes near this
T = TypeVar("T")


def _parsed(convert: Callable[[str], T], text: str) -> T | None:
    try:
        return convert(text)
    except ValueError:
        return None


def _checked(check: Callable[[], T], text: str, why: str = "") -> T:
    """check()'s value; its ValueError (or `why`) as argparse's error, naming the text."""
    try:
        return check()
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{why or e}, got {text!r}") from None


def threshold(text: str) -> float:
    """τ: a number in (0, 1] (at 0 every token is sure enough, above 1 none ever is)."""
    value = _parsed(float, text)
    return _checked(lambda: number_in(value, "", 0.0, 1.0, above=True), text)


def count(text: str) -> int:
    """A whole number >= 1 (tokens, a block size)."""
    value = _parsed(int, text)
    return _checked(lambda: int_in(value, "", 1, BIG), text)


def span(text: str) -> int | str:
    """A span: "auto", or a whole number of tokens >= 1."""
    if text == "auto":
        return text
    value = _parsed(int, text)
    why = f"must be auto or a whole number in [1, {BIG}]"
    return _checked(lambda: int_in(value, "", 1, BIG), text, why)


def listed(item: Callable[[str], T]) -> Callable[[str], list[T]]:
    """A comma-separated list of `item`s ("" is the empty list)."""

    def parse(text: str) -> list[T]:
        return [item(s.strip()) for s in text.split(",") if s.strip()]

    return parse
