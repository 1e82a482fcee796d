"""The finishing steps (infill_engine/finish/postprocess.py) read brackets with the stop rules'
lexer (infill_engine/lexer.py): where a construct's stop rule says a closing bracket ends it, the
finishing steps see the same bracket, and none in a string or a comment."""

from __future__ import annotations

import pytest

from infill_engine.finish import finish
from infill_engine.finish.postprocess import drop_closed_brackets, drop_suffix_overlap
from infill_engine.stop import StopRule

# Fills of an argument list whose `)` the suffix already has. Each has a bracket or a quote that
# a scanner of its own used to read otherwise than the lexer: a bracket in a line comment, a
# quote in a comment (`it's`), an escaped backslash before a closing quote, a string the end of
# its line closes.
CASES = [
    ("b,  # (see below\n    c)", "#"),
    ("a,  # it's the last\n    b)", "#"),
    ('"a\\\\", b)', "#"),
    ('"unclosed\n    b)', "#"),
    ("a,  // (old\n    b)", "//"),
]


@pytest.mark.parametrize(("fill", "comment"), CASES)
def test_the_finishing_steps_close_where_the_stop_rule_does(fill: str, comment: str) -> None:
    end = StopRule("expression", comment=comment).cut(fill)
    assert end == len(fill) - 1  # the rule reads the last `)` as the one closing the list
    # ... and the finishing steps drop that `)`, the one the suffix closes the list with
    assert drop_closed_brackets(fill, "\n)\n", comment) == fill[:end].rstrip()
    assert drop_suffix_overlap(fill, "\n)\n", comment) == fill[:end].rstrip()


def test_a_bracket_in_a_string_is_no_bracket_to_either() -> None:
    fill = 'print(")")'
    assert StopRule("expression").cut(fill) is None  # the list is still open
    assert drop_closed_brackets(fill, ")\n") == fill  # no `)` of the fill closes the cursor's


def test_the_comment_mark_is_the_languages() -> None:
    # `#` is no comment in JavaScript: the `(` after it is code there, and opens a bracket
    fill = "a,  # (b\n    c)"
    assert drop_closed_brackets(fill, "\n)\n", "//") == fill
    assert StopRule("expression", comment="//").cut(fill) is None
    # finish() gives the steps the language's mark: JavaScript's `//` hides the `(`
    got = finish("a,  // (old\n    b)", "foo(\n    ", "\n)\n", "javascript")
    assert got == "a,  // (old\n    b"
    got = finish("a,  # (old\n    b)", "foo(\n    ", "\n)\n", "python")
    assert got == "a,  # (old\n    b"
