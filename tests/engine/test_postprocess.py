"""Postprocessing rules (infill_engine/finish/postprocess.py) one by one, then the whole pipeline
on concrete editor situations."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from infill_engine.finish import finish
from infill_engine.finish.postprocess import (
    Indent,
    detect_indent,
    drop_suffix_overlap,
    postprocess,
    reindent,
    trim_trailing_blank,
)

TABS = Indent("\t", 1)
TWO = Indent(" ", 2)
FOUR = Indent(" ", 4)

PY_TWO = "def f(x):\n  if x:\n    return 1\n  return 2\n\n\nclass A:\n  pass\n"
PY_FOUR = "def f(x):\n    if x:\n        return 1\n    return 2\n"
C_TABS = "int f(int x) {\n\tif (x) {\n\t\treturn 1;\n\t}\n\treturn 2;\n}\n"


def test_detect_indent_two_four_and_tabs() -> None:
    assert detect_indent(PY_TWO) == TWO
    assert detect_indent(PY_FOUR) == FOUR
    assert detect_indent(C_TABS) == TABS


def test_detect_indent_defaults_without_indented_lines() -> None:
    assert detect_indent("x = 1\ny = 2\n") == FOUR
    assert detect_indent("") == FOUR
    assert detect_indent("a\n", default=TABS) == TABS
    assert detect_indent("a\n", default=TWO) == TWO


def test_detect_indent_ignores_alignment_and_comment_continuations() -> None:
    text = (
        "/**\n * Doc.\n * More.\n */\n"
        "void f() {\n  call(a,\n       b);\n  if (x) {\n    g();\n  }\n}\n"
        "void h() {\n  k();\n}\n"
    )
    assert detect_indent(text) == TWO


def test_detect_indent_tabs_win_by_majority() -> None:
    text = "a\n\tb\n\tc\n    d\n\te\n"
    assert detect_indent(text) == TABS
    assert detect_indent("a\n    b\n    c\n\td\n") == FOUR


def test_detect_indent_lone_indented_line_prefers_common_units() -> None:
    assert detect_indent("        x") == FOUR
    assert detect_indent("      x") == TWO
    assert detect_indent("   x", default=FOUR) == FOUR


def test_reindent_four_spaces_to_tabs_keeps_the_first_line() -> None:
    completion = "  x = 1\n    if y:\n        z = 2\n          # aligned\n"
    assert reindent(completion, FOUR, TABS) == "  x = 1\n\tif y:\n\t\tz = 2\n\t\t  # aligned\n"


def test_reindent_tabs_to_two_and_four_to_two() -> None:
    assert reindent("a\n\tb\n\t\tc", TABS, TWO) == "a\n  b\n    c"
    assert reindent("a\n    b\n        c\n", FOUR, TWO) == "a\n  b\n    c\n"
    assert reindent("a\n  b", TWO, FOUR) == "a\n    b"


def test_reindent_same_unit_is_identity() -> None:
    text = "\tx\n   y\n\t z"
    assert reindent(text, FOUR, FOUR) == text
    assert reindent(text, TABS, TABS) == text


@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=8))
def test_reindent_round_trips_whole_levels(levels: list[int]) -> None:
    completion = "\n".join("    " * n + "x" for n in levels)
    there = reindent(completion, FOUR, TABS)
    assert reindent(there, TABS, FOUR) == completion
    assert [len(line) - len(line.lstrip("\t")) for line in there.split("\n")[1:]] == levels[1:]


def test_drop_suffix_overlap_closing_bracket() -> None:
    assert drop_suffix_overlap("foo(a, b))", ")\n") == "foo(a, b)"
    assert drop_suffix_overlap('name"', '"]\n') == "name"
    assert drop_suffix_overlap("x]);", "]);\n") == "x"


def test_drop_suffix_overlap_takes_the_longest_tail() -> None:
    assert drop_suffix_overlap("a = f(x)\nreturn a", "\nreturn a\n") == "a = f(x)"
    # not "call(": a tail that closes the completion's own bracket stays (f(g(call())) is
    # whole; f(g(call()) was not)
    assert drop_suffix_overlap("call())", "))") == "call()"


def test_drop_suffix_overlap_keeps_a_single_letter_or_whitespace() -> None:
    assert drop_suffix_overlap("x = a", "a + 1") == "x = a"
    assert drop_suffix_overlap("x = 1\n", "\n") == "x = 1\n"
    assert drop_suffix_overlap("x = 1  ", "  \n") == "x = 1  "
    assert drop_suffix_overlap("x)", "") == "x)"


def test_drop_suffix_overlap_next_line_repeated() -> None:
    completion = "total = 0\n    for v in values:\n        total += v\n    return total\n"
    suffix = "\n\n    return total\n"
    assert drop_suffix_overlap(completion, suffix) == (
        "total = 0\n    for v in values:\n        total += v\n"
    )


def test_drop_suffix_overlap_ignores_blank_suffix_lines_and_a_blank_suffix() -> None:
    assert drop_suffix_overlap("a\nb\nc", "\n  \n b \n") == "a\n"
    assert drop_suffix_overlap("a\n\nb", "\n\n") == "a\n\nb"


def test_drop_suffix_overlap_bracket_line_needs_the_same_indentation() -> None:
    completion = "if (x) {\n\t\ty();\n\t}\n}\nint g;"
    assert drop_suffix_overlap(completion, "\n}\n") == "if (x) {\n\t\ty();\n\t}\n"
    inner_only = "if (x) {\n\t\ty();\n\t}\nz();"
    assert drop_suffix_overlap(inner_only, "\n}\n") == inner_only


def test_trim_trailing_blank() -> None:
    assert trim_trailing_blank("x = 1\n\n  \n") == "x = 1"
    assert trim_trailing_blank("x = 1   ") == "x = 1"
    assert trim_trailing_blank("  a\n  b") == "  a\n  b"
    assert trim_trailing_blank("\n \n") == ""


def test_postprocess_tabs_document_and_four_space_model() -> None:
    prefix = "def f(a):\n\tif a:\n\t\t"
    completion = "x = 1\n        if x:\n            return x\n\n"
    out = postprocess(completion, prefix, "\n\treturn 0\n", model_indent=FOUR)
    assert out == "x = 1\n\t\tif x:\n\t\t\treturn x"


def test_postprocess_detects_the_model_unit_from_the_cursor_line() -> None:
    prefix = "def f(a):\n\tif a:\n\t\t"
    completion = "x = 1\n        if x:\n            return x\n"
    assert postprocess(completion, prefix, "\n") == "x = 1\n\t\tif x:\n\t\t\treturn x"


def test_postprocess_two_space_document() -> None:
    prefix = "def g(x):\n  if x:\n    return 1\n  "
    completion = "for i in x:\n        print(i)\n    return 0\n"
    out = postprocess(completion, prefix, "\n", model_indent=FOUR)
    assert out == "for i in x:\n    print(i)\n  return 0"


def test_postprocess_keeps_the_model_unit_in_an_unindented_document() -> None:
    out = postprocess("if x {\n\ty()\n}\n", "func main() ", "\n")
    assert out == "if x {\n\ty()\n}"


def test_postprocess_closing_bracket_overlap() -> None:
    assert postprocess("a, b))", "print(f(", "))\n") == "a, b"


def test_postprocess_next_line_overlap() -> None:
    prefix = "def area(r):\n    "
    suffix = "\n    return result\n"
    completion = "result = 3.14 * r * r\n    return result\n"
    assert postprocess(completion, prefix, suffix) == "result = 3.14 * r * r"


def test_postprocess_whitespace_only_is_none() -> None:
    assert postprocess("   \n\n\t", "x = ", "\n") is None
    assert postprocess("", "x = ", "") is None
    assert postprocess("return x\n", "def f():\n    ", "\n    return x\n") is None


def test_postprocess_mid_line_keeps_one_line() -> None:
    out = postprocess("a, b\nc = 2\n", "foo(", ")\n")
    assert out == "a, b"
    assert postprocess("\nx = 1", "foo(", ")") is None


def test_postprocess_mid_line_keeps_a_separating_space() -> None:
    assert postprocess("x, ", "f(", "y)\n") == "x, "
    assert postprocess("x, ", "f(", " y)\n") == "x,"


def test_postprocess_end_of_line_allows_several_lines() -> None:
    out = postprocess("\n    y = 2", "def f():\n    x = 1", "   \ndef g(): pass\n")
    assert out == "\n    y = 2"


def test_postprocess_crlf_document() -> None:
    prefix = "def f(a):\r\n    if a:\r\n        "
    completion = "x = 1\r\n        return x\n"
    out = postprocess(completion, prefix, "\r\n    return 0\r\n")
    assert out == "x = 1\r\n        return x"


def test_postprocess_lf_document_normalises_crlf_and_cr_output() -> None:
    out = postprocess("a = 1\r\n    b = 2\r    c = 3", "def f():\n    ", "\n")
    assert out == "a = 1\n    b = 2\n    c = 3"


def test_postprocess_crlf_document_overlap_uses_crlf_suffix() -> None:
    prefix = "def f():\r\n    "
    suffix = "\r\n    return y\r\n"
    assert postprocess("y = 1\r\n    return y\r\n", prefix, suffix) == "y = 1"


def test_postprocess_mixed_endings_use_the_majority() -> None:
    out = postprocess("a\n    b", "def f():\r\n    x\n    ", "\n\n")
    assert out == "a\n    b"


@given(st.text(alphabet="ab(): \n\t\r", max_size=30), st.text(alphabet="ab): \n", max_size=10))
def test_postprocess_never_returns_blank_or_adds_a_line_mid_line(
    completion: str, suffix: str
) -> None:
    out = postprocess(completion, "x = f(", suffix)
    assert out is None or out.strip()
    if out is not None and suffix.split("\n", 1)[0].strip():
        assert "\n" not in out


def test_no_doubled_space_after_code_that_ends_in_a_space() -> None:
    assert postprocess(" self", "def f(self):\n    return ", "\n") == "self"
    assert postprocess("\t+ 1", "x = a ", "\n") == "+ 1"
    # without a trailing space in the prefix, the model's space is the separator
    assert postprocess(" self", "def f(self):\n    return", "\n") == " self"


def test_a_repetition_loop_is_cut_where_it_starts() -> None:
    """The hole of issue 32: a blank line in a `with` block, filled with `path.` over and over
    until the span ran out; nothing is left to show. A line written again and again is kept
    once, and the syntax check then judges what is left."""
    prefix, suffix = "with open(path) as f:\n    ", "\n"
    assert postprocess("path." * 64, prefix, suffix) is None
    assert finish("path." * 64, prefix, suffix, "python") is None
    assert postprocess("data = f.read()" + ".read()" * 9, prefix, suffix) == "data = f"
    assert finish("data = f.read()" + ".read()" * 9, prefix, suffix, "python") == "data = f"
    lines = "print(line)\n    " * 8
    assert postprocess(lines, prefix, suffix) == "print(line)"
    # a ruler and a few copies are not loops
    assert postprocess("# " + "-" * 60, prefix, suffix) == "# " + "-" * 60
    assert postprocess("x = [0, 0, 0]", prefix, suffix) == "x = [0, 0, 0]"


def test_a_closer_of_a_bracket_opened_on_the_line_is_kept_where_the_suffix_closes_outer_ones() -> (
    None
):
    """`app: { configurable: true,` + `... value: app }` before `\n})`: the completion's `}`
    closes `app: {`, the suffix's `})` the `Object.create(req, {` around it. Dropped, the
    document would leave a `{` open (held-out express.js, a draft shown without its `}`)."""
    prefix = "app.request = Object.create(req, {\n  app: { configurable: true,"
    suffix = "\n})\n"
    kept = drop_suffix_overlap(" value: app }", suffix, "//", prefix)
    assert kept == " value: app }"
    # the suffix closing the completion's own bracket: dropped, as without the prefix
    call = "x = f(a,"
    assert drop_suffix_overlap("\n  b)", "\n)\n", "#", call) == "\n  b"
    assert drop_suffix_overlap(" value: app }", suffix, "//") == " value: app"


def test_a_one_line_block_keeps_its_closer_where_the_suffix_closes_outer_blocks_below() -> None:
    """`unsafe { char:` + `:from_u32_unchecked(n) }` before `\n    }\n}`: the suffix's `}}`
    close the `if` and the `fn`, which read the same as the completion's `}` and one of them
    (held-out Rust, rand: the true line lost its `}`)."""
    prefix = "fn f(n: u32) -> char {\n    if n > 0 {\n        unsafe { char:"
    suffix = "\n    }\n}\n"
    line = ":from_u32_unchecked(n) }"
    assert drop_suffix_overlap(line, suffix, "//", prefix) == line
    # the same closer before a suffix that closes on the cursor's line: dropped
    assert drop_suffix_overlap(line, " }\n    }\n}\n", "//", prefix) == line[:-2]
    # and a completion over lines, whose closer the suffix's next line holds: dropped
    assert drop_suffix_overlap("\n  b)", "\n)\n", "#", "x = f(a,") == "\n  b"
