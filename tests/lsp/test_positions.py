"""LSP positions, str offsets and tree-sitter points: units, line breaks, clamping, round trips."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsp_server.workspace.positions import (
    ENCODINGS,
    byte_offset,
    choose_encoding,
    line_at,
    line_starts,
    offset_at,
    offset_clamped,
    offset_from_byte,
    point_at,
    position_at,
    units,
)

EMOJI = "😀"  # U+1F600: 4 utf-8 bytes, 2 utf-16 units
CJK = "中"  # U+4E2D: 3 utf-8 bytes, 1 utf-16 unit

pieces = st.sampled_from(["a", "b", " ", "\n", "\r\n", "\r", EMOJI, CJK, "é", "\t"])
texts = st.lists(pieces, max_size=40).map("".join)
encodings = st.sampled_from(ENCODINGS)


def test_choose_encoding_prefers_utf8_then_the_lsp_default() -> None:
    assert choose_encoding(["utf-32", "utf-8", "utf-16"]) == "utf-8"
    assert choose_encoding(["utf-32", "utf-16"]) == "utf-16"
    assert choose_encoding(["utf-32"]) == "utf-16"
    assert choose_encoding([]) == "utf-16"
    assert choose_encoding(None) == "utf-16"


def test_line_starts_handles_every_lsp_break() -> None:
    assert line_starts("") == [0]
    assert line_starts("ab") == [0]
    assert line_starts("a\nb\r\nc\rd") == [0, 2, 5, 7]
    assert line_starts("a\n") == [0, 2]
    assert line_starts("\r\n\r\n") == [0, 2, 4]
    assert line_starts("\n\r") == [0, 1, 2]  # "\n\r" is two breaks, not one
    assert line_starts("a\r\r\nb") == [0, 2, 4]


@given(texts)
def test_line_starts_matches_a_character_walk(text: str) -> None:
    expected = [0]
    for i, ch in enumerate(text):
        if ch == "\n" or (ch == "\r" and text[i + 1 : i + 2] != "\n"):
            expected.append(i + 1)
    assert line_starts(text) == expected


def test_line_starts_ignores_what_splitlines_splits_on() -> None:
    text = "a\u2028b\x0cc\x1cd\x85e\vf"
    assert len(text.splitlines()) > 1
    assert line_starts(text) == [0]
    assert offset_at(text, 0, 100, "utf-16") == len(text)
    assert offset_at(text, 1, 0, "utf-16") is None
    assert position_at(text, len(text), "utf-32") == (0, len(text))


def test_units_per_encoding() -> None:
    assert [units(EMOJI, e) for e in ENCODINGS] == [4, 2, 1]
    assert [units(CJK, e) for e in ENCODINGS] == [3, 1, 1]
    assert [units("é", e) for e in ENCODINGS] == [2, 1, 1]
    assert units("ab" + EMOJI + CJK, "utf-16") == 5
    assert units("", "utf-8") == 0


def test_units_counts_a_lone_surrogate_instead_of_raising() -> None:
    assert units("\ud800", "utf-8") == 3
    assert units("\ud800", "utf-16") == 1


def test_units_rejects_an_unknown_encoding() -> None:
    with pytest.raises(ValueError, match="utf-7"):
        units("é", "utf-7")


def test_offset_at_counts_units_of_the_encoding() -> None:
    text = f"x{EMOJI}y\n{CJK}z"
    assert offset_at(text, 0, 3, "utf-16") == 2  # after x😀
    assert offset_at(text, 0, 5, "utf-8") == 2
    assert offset_at(text, 0, 2, "utf-32") == 2
    assert offset_at(text, 1, 1, "utf-16") == 5  # after 中
    assert offset_at(text, 1, 3, "utf-8") == 5
    assert offset_at(text, 1, 1, "utf-32") == 5


def test_offset_at_rounds_down_inside_a_character() -> None:
    text = f"x{EMOJI}y"
    assert offset_at(text, 0, 2, "utf-16") == 1  # between the surrogates
    for byte in (2, 3, 4):
        assert offset_at(text, 0, byte, "utf-8") == 1
    assert offset_at(CJK + "a", 0, 2, "utf-8") == 0


def test_offset_at_clamps_character_to_the_line_end() -> None:
    text = "ab\r\ncd\ref"
    assert offset_at(text, 0, 99, "utf-16") == 2  # before "\r\n", not inside it
    assert offset_at(text, 1, 99, "utf-8") == 6
    assert offset_at(text, 2, 99, "utf-32") == len(text)
    assert offset_at("a\n", 1, 5, "utf-16") == 2  # the final empty line


def test_offset_at_out_of_range_is_none() -> None:
    text = "a\nb"
    assert offset_at(text, 2, 0, "utf-16") is None
    assert offset_at(text, -1, 0, "utf-16") is None
    assert offset_at(text, 0, -1, "utf-16") is None
    assert offset_at("", 0, 0, "utf-8") == 0
    assert offset_at("a\n", 2, 0, "utf-8") is None


def test_position_at_crlf_and_lone_cr() -> None:
    text = "ab\r\ncd\ref"
    assert position_at(text, 3, "utf-16") == (0, 2)  # between "\r" and "\n"
    assert position_at(text, 4, "utf-16") == (1, 0)
    assert position_at(text, 7, "utf-16") == (2, 0)
    assert position_at(text, len(text), "utf-16") == (2, 2)


def test_position_at_clamps_the_offset() -> None:
    text = f"a\n{EMOJI}"
    assert position_at(text, -5, "utf-16") == (0, 0)
    assert position_at(text, 99, "utf-16") == (1, 2)
    assert position_at(text, 99, "utf-8") == (1, 4)
    assert position_at(text, 99, "utf-32") == (1, 1)


def test_line_at_excludes_the_break() -> None:
    text = "ab\r\ncd\ref\n"
    assert line_at(text, 0) == (0, 2)
    assert line_at(text, 2) == (0, 2)
    assert line_at(text, 3) == (0, 2)  # between "\r" and "\n"
    assert line_at(text, 5) == (4, 6)
    assert line_at(text, 7) == (7, 9)
    assert line_at(text, len(text)) == (len(text), len(text))
    assert line_at(text, -1) == (0, 2)


def test_byte_offsets_round_down_inside_a_character() -> None:
    text = f"a{EMOJI}{CJK}b"
    assert [byte_offset(text, i) for i in range(5)] == [0, 1, 5, 8, 9]
    assert [offset_from_byte(text, b) for b in range(10)] == [0, 1, 1, 1, 1, 2, 2, 2, 3, 4]
    assert offset_from_byte(text, -3) == 0
    assert offset_from_byte(text, 99) == len(text)
    assert byte_offset(text, 99) == 9


def test_point_at_uses_newline_rows_and_byte_columns() -> None:
    text = f"a\n{EMOJI}b\rc"
    assert point_at(text, 0) == (0, 0)
    assert point_at(text, 2) == (1, 0)
    assert point_at(text, 3) == (1, 4)
    assert point_at(text, len(text)) == (1, 7)  # a lone "\r" does not start a tree-sitter row


@given(texts, encodings, st.integers(min_value=-2, max_value=60))
def test_offset_position_offset_round_trips(text: str, encoding: str, offset: int) -> None:
    clamped = max(0, min(offset, len(text)))
    if 0 < clamped < len(text) and text[clamped - 1 : clamped + 1] == "\r\n":
        clamped -= 1  # the middle of a CRLF is the end of its line
    line, character = position_at(text, offset, encoding)
    assert offset_at(text, line, character, encoding) == clamped


@given(texts, encodings)
def test_every_line_start_and_end_round_trips(text: str, encoding: str) -> None:
    starts = line_starts(text)
    for line, start in enumerate(starts):
        assert position_at(text, start, encoding) == (line, 0)
        assert offset_at(text, line, 0, encoding) == start
        end = line_at(text, start)[1]
        assert offset_at(text, line, 10**9, encoding) == end
    assert offset_at(text, len(starts), 0, encoding) is None


@given(texts, st.integers(min_value=0, max_value=60))
def test_byte_offsets_round_trip_and_match_points(text: str, offset: int) -> None:
    offset = min(offset, len(text))
    byte = byte_offset(text, offset)
    assert byte == len(text[:offset].encode())
    assert offset_from_byte(text, byte) == offset
    row, column = point_at(text, offset)
    lines = text[:offset].encode().split(b"\n")
    assert (row, column) == (len(lines) - 1, len(lines[-1]))


def test_a_megabyte_document_is_fast() -> None:
    text = ("    value = compute(x, 😀, 中)\r\n" * 40_000)[:1_000_000]
    last = len(line_starts(text)) - 1
    started = time.perf_counter()
    for encoding in ENCODINGS:
        offset = offset_at(text, last, 10, encoding)
        assert offset is not None
        assert position_at(text, offset, encoding)[0] == last
    point_at(text, len(text) - 1)
    offset_from_byte(text, byte_offset(text, len(text) - 1))
    # about 0.1 s on a 2-core machine (the whole test, the text's making included); a position
    # read a character at a time in Python takes seconds. 2 s: twenty times what it takes.
    assert time.perf_counter() - started < 2.0


def test_offset_clamped_reads_an_edit_range_like_the_lsp_reference() -> None:
    text = "ab\r\nc😀d"
    assert offset_clamped(text, 0, 9, "utf-16") == 2  # past the line's end: before its break
    assert offset_clamped(text, 1, 2, "utf-16") == 5  # inside the pair: its start
    assert offset_clamped(text, 7, 0, "utf-16") == len(text)  # past the last line: the end
    assert offset_clamped(text, -1, -1, "utf-8") == 0
