"""The one lexer the planner and the stop rules share: what is code, where a comment starts,
how deep the brackets are."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infill_engine import lexer


def code_text(text: str, comment: str) -> str:
    return "".join(c for _, c in lexer.code(text, comment))


@pytest.mark.parametrize(
    ("text", "comment", "code"),
    [
        ("x = f(\"(\", ')') # (", "#", "x = f(, ) "),
        ('s = "a\\"(" + b', "#", "s =  + b"),  # an escaped quote does not end the string
        ("a = '#' # b", "#", "a =  "),  # a comment mark inside a string is not a comment
        ("u = 1 // c\nv = 2", "//", "u = 1 \nv = 2"),
        ("s = 'open\nt = (1)", "#", "s = \nt = (1)"),  # a newline ends a string
        ("p = 1 # x\n# y\nq", "#", "p = 1 \n\nq"),
        ("x = 1 # (", "", "x = 1 # ("),  # no comment mark: all of it is code
        ("`a ${b}` + c", "//", " + c"),
        ('s = "a\\\n(" + b\nc', "#", "s =  + b\nc"),  # a line continuation inside a string
    ],
)
def test_code_is_what_is_outside_strings_and_comments(text: str, comment: str, code: str) -> None:
    assert code_text(text, comment) == code


def test_comment_start_and_depth() -> None:
    assert lexer.comment_start('x = "#" # real', "#") == 8
    assert lexer.comment_start("x = 1", "#") is None
    assert lexer.comment_start("x = 1 # y", "") is None
    assert lexer.strip_comment("if x:  # note:", "#") == "if x:  "
    assert lexer.depth('f(a, "(", [b', "#") == 2
    assert lexer.depth("g(a)) # (", "#") == -1
    assert lexer.depth("h(\n  x", "#") == 1  # across lines


@given(st.text(alphabet="ab(){}[]\"'`#/\\\n ", max_size=200), st.sampled_from(["#", "//", ""]))
def test_the_lexer_ends_and_yields_offsets_in_order(text: str, comment: str) -> None:
    offsets = [i for i, _ in lexer.code(text, comment)]
    assert offsets == sorted(set(offsets))
    assert all(text[i] == c for i, c in lexer.code(text, comment))
    if "\\" not in text:  # an escaped newline in a string continues it: the only one skipped
        assert [i for i, c in enumerate(text) if c == "\n"] == [
            i for i, c in lexer.code(text, comment) if c == "\n"
        ]


@given(st.text(alphabet="ab(){}[]\"'`#/\\\n x", max_size=300), st.sampled_from(["#", "//", ""]))
def test_structure_is_the_brackets_and_newlines_of_the_code(text: str, comment: str) -> None:
    # the fast path jumps over plain runs; it must see exactly what stepping through sees
    want = [(i, c) for i, c in lexer.code(text, comment) if c in "()[]{}\n"]
    assert list(lexer.structure(text, comment)) == want


def test_parts_split_at_top_level_commas_only() -> None:
    text = 'a, f(b, c), "d,e", [x, y]'
    assert [text[a:b].strip() for a, b in lexer.parts(text)] == ["a", "f(b, c)", '"d,e"', "[x, y]"]
    assert lexer.parts("") == [(0, 0)]
    line = "x # a, b"
    assert [line[a:b] for a, b in lexer.parts(line, "#")] == [line]  # a comment's comma


def test_group_end_is_past_the_closing_bracket() -> None:
    assert lexer.group_end("f(a, (b), ')') + 1", 1) == 14
    assert lexer.group_end("(a, b", 0) is None
