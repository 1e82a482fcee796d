"""Repetition loops (repeat.py): the rule on texts, the stop rule that ends a row once a loop is
certain (stop.py), and the builtin model on the hole where it loops (`with open(path) as f:`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infill_engine import Engine, InfillParams, load, planner
from infill_engine.repeat import (
    MAX_PERIOD,
    MIN_COPIES,
    MIN_LENGTH,
    Loop,
    cut_loop,
    find_loop,
)
from infill_engine.stop import StopRule


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("path." * 20, ""),  # nothing useful is left
        ("return os" + ".path" * 12 + "\n", "return os"),
        ("    pass\n" * 6, "    pass\n"),  # repeated lines are kept once
        ("pass\n    " * 6, "pass\n"),  # the first line continues the cursor line
        ("x = [" + "0, " * 12 + "0]", "x = ["),
        ("ab" + "é" * 30, "ab"),  # characters, not bytes
        ("))))" + "ab" * 20, "))))"),
        ('"""\n    ' * 6 + "return a", '"""\n'),  # a line of punctuation over and over
    ],
)
def test_text_is_cut_where_the_loop_starts(text: str, cut: str) -> None:
    assert cut_loop(text) == cut


@pytest.mark.parametrize(
    "text",
    [
        "# " + "=" * 78,  # a ruler: punctuation only
        ")" * 40,  # the closers of deep calls
        " " * 80 + "\t" * 20,
        "\n" * 30 + "    \n" * 10,  # blank lines are no code
        "x = [0, 0, 0, 0]",  # a few copies are data
        "path.path.path.",  # three copies, and short
        "self.a = a\n        self.b = b\n        self.c = c\n        self.d = d\n",
        'def f(x):\n    """Doc."""\n    return x + 1\n',
        "",
    ],
)
def test_real_code_has_no_loop(text: str) -> None:
    assert find_loop(text) is None
    assert cut_loop(text) == text


def test_the_loop_found_is_the_first_at_its_shortest_unit() -> None:
    text = "a = 1\n" + "xy" * 20 + "\n" + "abc" * 20
    loop = find_loop(text)
    assert loop is not None
    assert (loop.start, loop.end, loop.unit, loop.copies) == (6, 46, "xy", 20)
    assert not loop.of_lines
    long_unit = "".join(chr(ord("a") + i % 26) for i in range(MAX_PERIOD + 1))  # one too long
    assert find_loop(long_unit * 5) is None
    assert find_loop("ab" * (MIN_LENGTH // 2 - 1)) is None  # one copy short of MIN_LENGTH
    assert find_loop("ab" * (MIN_LENGTH // 2)) is not None


def test_a_loop_ends_the_construct_where_the_loop_ends() -> None:
    """A stop rule reads a loop as the construct's end: the engine stops the row there (with
    "syntax") and keeps the loop in its text, which the finishing steps cut."""
    block = StopRule("indent", indent=4)
    text = "path." * 8
    assert block.cut(text) == len(text)
    assert block.cut("path." * 3) is None  # not certain yet: the span goes on
    assert block.cut("x = 1\n    y = 2\n") is None  # a block still open
    # the construct's own end comes first: the loop after it is not the construct's
    assert block.cut("x = 1\ny = " + "path." * 8) == len("x = 1")
    line = StopRule("line", newline=True)
    assert line.cut("f(" + "a, " * 12) == len("f(" + "a, " * 12)
    assert StopRule("none").cut("path." * 20) is None  # a span that is only a budget


def naive_loop(text: str) -> Loop | None:
    """find_loop's definition, one character at a time."""
    for start in range(len(text)):
        for p in range(1, MAX_PERIOD + 1):
            unit = text[start : start + p]
            if len(unit) < p or not (
                any(c.isalnum() or c == "_" for c in unit) or ("\n" in unit and unit.strip())
            ):
                continue
            end = start + p
            while end < len(text) and text[end] == text[end - p]:
                end += 1
            if end - start >= max(MIN_COPIES * p, MIN_LENGTH):
                return Loop(start, end, unit)
    return None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["ab", "a", "é.", " ", "\n", ")", "x_1 ", "path."]),
                  st.integers(1, 14)),
        max_size=8,
    ).map(lambda parts: "".join(unit * n for unit, n in parts))
)  # fmt: skip
def test_the_fast_search_finds_what_the_definition_says(text: str) -> None:
    """find_loop (big-integer XOR over UTF-32) against the definition, character by character."""
    assert find_loop(text) == naive_loop(text)
    assert text.startswith(cut_loop(text))


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


def test_the_builtin_model_stops_once_its_loop_is_certain(engine: Engine) -> None:
    """Before the stop, this hole ran its span out: 192 tokens of `path.` (span_full)."""
    text = "with open(path) as f:\n    \n"
    offset = text.index("\n    ") + 5
    plan = planner.plan(text, offset, "python", engine.encode, max_positions=512, block_size=32)
    params = InfillParams(span="auto", min_tokens=1, max_span=plan.max_span)
    r = engine.infill(text[:offset], text[offset:], params, plan=plan)
    assert find_loop(r.text) is not None, r.text  # the model's own text keeps the loop
    assert r.stop_reason == "syntax", r
    assert r.tokens <= 64 and r.span < 192, r
    assert cut_loop(r.text) == ""
    fixed = engine.infill(text[:offset], text[offset:], InfillParams(span=48, min_tokens=1))
    assert fixed.stop_reason != "syntax"  # no plan, no construct: the span is a budget
