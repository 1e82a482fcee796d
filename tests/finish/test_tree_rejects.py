"""The tree-sitter check (syntax.Check) for languages without a compiler at hand: a candidate
that adds an ERROR node or a MISSING one (the token the grammar had to invent: a `;`, a `)`)
is not shown, and one that completes the user's line is."""

from __future__ import annotations

import pytest

from infill_engine.finish import Around, finish
from infill_engine.finish.syntax import Check

# (language, before the cursor, after it, a candidate that only a MISSING node makes whole, one
# with an ERROR node, one that fits)
CASES = [
    ("c", "int f(int x) {\n  ", "\n}\n", "return x", "return x x;", "return x;"),
    ("cpp", "int f(int x) {\n  ", "\n}\n", "return x", "return ) x;", "return x;"),
    (
        "java",
        "class A {\n  int f(int x) {\n    ",
        "\n  }\n}\n",
        "return x",
        "return x x;",
        "return x;",
    ),
    ("javascript", "function f(x) {\n  ", "\n}\n", "return g(x", "return x x)", "return x;"),
    (
        "typescript",
        "function f(x: number) {\n  ",
        "\n}\n",
        "return g(x",
        "return x x)",
        "return x;",
    ),
    ("rust", "fn f(x: i32) -> i32 {\n    ", "\n}\n", "let y = x", "let y = = x;", "x + 1"),
    (
        "go",
        "package p\n\nfunc f(x int) int {\n\t",
        "\n}\n",
        "return g(x",
        "return x x)",
        "return x",
    ),
]


@pytest.mark.parametrize(("language_id", "before", "after", "missing", "error", "fits"), CASES)
def test_missing_and_error_nodes_the_candidate_adds_are_rejected(
    language_id: str, before: str, after: str, missing: str, error: str, fits: str
) -> None:
    check = Check(Around(before, after), language_id)
    assert check.checked
    assert check.clean(missing) is False, missing
    assert check.clean(error) is False, error
    assert check.clean(fits) is True, fits
    assert finish(fits, before, after, language_id, document=Around(before, after)) == fits
    shown = finish(error, before, after, language_id, document=Around(before, after))
    assert shown != error and (shown is None or check.clean(shown))
