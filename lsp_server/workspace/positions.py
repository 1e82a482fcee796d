"""Position arithmetic: the one place that converts between the three ways a place in a document
is named.

* LSP positions: (line, character), the character counted in code units of the encoding
  negotiated at initialisation ("utf-8", "utf-16" or "utf-32"); lines end at "\\n", "\\r\\n" or
  "\\r" and nothing else (unlike str.splitlines, which also splits on "\\x0c", "\\u2028", ...).
* Python str offsets: code points.
* tree-sitter byte offsets and points (row, utf-8 byte column), whose rows end at "\\n" only.

Every function is a linear scan at worst, so a call on a 1 MB document stays in the
low milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import accumulate

ENCODINGS: tuple[str, ...] = ("utf-8", "utf-16", "utf-32")

_BREAK = re.compile(r"\r\n|\r|\n")


def choose_encoding(offered: Sequence[str] | None) -> str:
    """The position encoding to announce: utf-8 when the client offers it, else the LSP default.

    utf-8 wins even over a utf-32 listed first, because tree-sitter speaks utf-8 bytes and the
    conversions are then cheapest.
    """
    if offered is not None and "utf-8" in offered:
        return "utf-8"
    return "utf-16"


def _lf_only(text: str) -> str:
    """text, same length, with every LSP break ending in one "\n" and no other "\n" or "\r".

    str.find and str.split then locate lines at C speed.
    """
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\x00\n").replace("\r", "\n")


def line_starts(text: str) -> list[int]:
    """Offsets at which each LSP line starts; a text ending in a break has a final empty line."""
    lengths = (len(piece) + 1 for piece in _lf_only(text).split("\n")[:-1])
    return [0, *accumulate(lengths)]


def _check(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown position encoding {encoding!r}; expected one of {ENCODINGS}")


def units(s: str, encoding: str) -> int:
    """Length of s in code units of encoding."""
    _check(encoding)
    if encoding == "utf-32" or s.isascii():
        return len(s)
    # surrogatepass: a lone surrogate (JSON allows them) still has a length instead of raising
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


def _utf8_code_points(segment: str, count: int) -> int:
    data = segment.encode("utf-8", "surrogatepass")
    cut = max(0, min(count, len(data)))
    while 0 < cut < len(data) and data[cut] & 0xC0 == 0x80:
        cut -= 1
    # Each code point has exactly one byte that is not a continuation byte.
    return len(data[:cut].translate(None, _CONTINUATION_BYTES))


def _utf16_code_points(segment: str, count: int) -> int:
    if units(segment, "utf-16") == len(segment):  # nothing astral: units are code points
        return min(count, len(segment))
    used = 0
    for i, ch in enumerate(segment):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > count:
            return i
    return len(segment)


def _code_points(segment: str, count: int, encoding: str) -> int:
    """How many leading code points of segment fit in count code units, rounding down."""
    _check(encoding)
    if encoding == "utf-32" or segment.isascii():
        return max(0, min(count, len(segment)))
    if encoding == "utf-8":
        return _utf8_code_points(segment, count)
    return _utf16_code_points(segment, count)


def line_end(text: str, start: int) -> int:
    """The offset of the line break (or the text's end) at or after start."""
    found = _BREAK.search(text, start)
    return len(text) if found is None else found.start()


def _nth_line_start(text: str, line: int) -> int | None:
    if line == 0:
        return 0
    pieces = _lf_only(text).split("\n", line)
    return None if len(pieces) <= line else len(text) - len(pieces[-1])


def offset_at(text: str, line: int, character: int, encoding: str) -> int | None:
    """The str offset of an LSP position, or None when the line does not exist.

    A character past the end of the line clamps to the line's end (before its break), as the
    LSP spec asks; one inside a multi-unit character rounds down to that character's start.
    """
    if line < 0 or character < 0:
        return None
    start = _nth_line_start(text, line)
    if start is None:
        return None
    # Every code point is at least one unit, so no more than `character` of them are needed.
    end = min(line_end(text, start), start + character)
    return start + _code_points(text[start:end], character, encoding)


def offset_clamped(text: str, line: int, character: int, encoding: str) -> int:
    """offset_at for an edit's range: a line past the last one means the end of the document
    (as vscode-languageserver-textdocument reads it); negative numbers mean 0."""
    found = offset_at(text, max(0, line), max(0, character), encoding)
    return len(text) if found is None else found


def _clamp(offset: int, text: str) -> int:
    return max(0, min(offset, len(text)))


def line_at(text: str, offset: int) -> tuple[int, int]:
    """(start, end) offsets of the LSP line holding offset; end excludes the line break.

    An offset on a break belongs to the line the break ends, including one between "\\r" and
    "\\n".
    """
    offset = _clamp(offset, text)
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        offset -= 1
    start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    return start, line_end(text, offset)


def _line_number(text: str, offset: int) -> int:
    breaks = text.count("\n", 0, offset) + text.count("\r", 0, offset)
    return breaks - text.count("\r\n", 0, offset)


def position_at(text: str, offset: int, encoding: str) -> tuple[int, int]:
    """The LSP (line, character) of a str offset, the offset clamped to [0, len(text)]."""
    start, end = line_at(text, offset)
    offset = min(_clamp(offset, text), end)
    return _line_number(text, start), units(text[start:offset], encoding)


def byte_offset(text: str, offset: int) -> int:
    """utf-8 byte count of text[:offset]."""
    return units(text[: _clamp(offset, text)], "utf-8")


def offset_from_byte(text: str, byte: int) -> int:
    """The str offset of a utf-8 byte offset, rounding down inside a multi-byte character."""
    # Each code point is at least one byte, so the first `byte` of them hold the answer.
    byte = max(0, byte)
    return _code_points(text[:byte], byte, "utf-8")


def point_at(text: str, offset: int) -> tuple[int, int]:
    """The tree-sitter point (row, utf-8 byte column) of a str offset.

    tree-sitter counts rows at "\\n" only, so after a lone "\\r" its row differs from the LSP line.
    """
    offset = _clamp(offset, text)
    start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset), byte_offset(text[start:offset], offset - start)


def point_after(point: tuple[int, int], data: bytes) -> tuple[int, int]:
    """The (row, byte column) reached from point by the bytes data."""
    rows = data.count(b"\n")
    if rows == 0:
        return point[0], point[1] + len(data)
    return point[0] + rows, len(data) - data.rfind(b"\n") - 1
