"""The tokens the structure rules compare lines by: names, numbers, strings and single marks,
with their str spans; and a line's shape, its tokens with names, numbers and strings abstracted
(keywords stay themselves: `return x` and `yield x` differ)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_TOKEN = re.compile(
    r"[A-Za-z_$][\w$]*|\d[\w.]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|`[^`\n]*`|\S"
)
_NAME = re.compile(r"[A-Za-z_$][\w$]*\Z")
# Keywords of the grammar languages that are not names: a rename never maps them, a shape keeps
# them.
_KEYWORDS = """
    and as assert async await break case catch class const continue def default defer del do elif
    else enum except export extends final finally fn for from func function go if impl import in
    interface is let loop match mod module mut new nil none not null or package pass private
    protected pub public raise return self static struct super switch this throw throws trait try
    type typedef union unsafe use var void where while with yield true false True False None
"""
KEYWORDS = frozenset(_KEYWORDS.split())


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int


def tokens(line: str) -> list[Token]:
    return [Token(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(line)]


def is_name(text: str) -> bool:
    return bool(_NAME.match(text)) and text not in KEYWORDS


def _kind(text: str) -> str:
    if is_name(text):
        return "N"
    if text[0].isdigit():
        return "0"
    if text[0] in "\"'`" and len(text) > 1:
        return "S"
    return text


def shape(toks: Sequence[Token]) -> tuple[str, ...]:
    return tuple(_kind(t.text) for t in toks)
