"""The tree-sitter check (syntax.Check) for languages without a compiler at hand: a candidate
that adds an ERROR node or a MISSING one (the token the grammar had to invent: a `;`, a `)`)
is not shown, and one that completes the user's line is."""

from __future__ import annotations

import pytest

from infill_engine.finish import Around, finish, syntax
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


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The documents the check parses itself (syntax._document_parse), in order."""
    parse = syntax._document_parse
    seen: list[bytes] = []

    def counted(language: str, source: bytes) -> object:
        seen.append(source)
        return parse(language, source)

    monkeypatch.setattr(syntax, "_document_parse", counted)
    return seen


@pytest.mark.parametrize(
    ("language_id", "before", "after", "missing", "error", "fits"),
    [*CASES, ("python", "def f(x):\n    ", "\n", "return g(x", "return x x", "return x")],
)
def test_a_clean_document_s_own_tree_is_read_not_parsed_again(
    parsed: list[bytes],
    language_id: str,
    before: str,
    after: str,
    missing: str,
    error: str,
    fits: str,
) -> None:
    """The language server keeps each document's tree (reparsed incrementally): given it, the
    check parses only the candidates, with the same verdicts; the tree of a broken document,
    or of another text, is not read, and the document is parsed as before."""
    parser = syntax.parser_for(language_id)
    assert parser is not None
    tree = parser.parse((before + after).encode())
    check = Check(Around(before, after, tree=tree), language_id)
    verdicts = [check.clean(missing), check.clean(error), check.clean(fits)]
    assert verdicts == [False, False, True] and parsed == []
    document = Around(before, after, tree=tree)  # the finishing steps pass it on
    assert finish(fits, before, after, language_id, document=document) == fits and parsed == []
    for other in (before + "x x" + after, before + after + "\n"):  # broken; another text
        Check(Around(before, after, tree=parser.parse(other.encode())), language_id).clean(fits)
    assert parsed == [(before + after).encode()] * 2


def test_a_broken_python_document_s_own_tree_finds_the_compile_step_s_block(
    parsed: list[bytes],
) -> None:
    """While a line is typed the document is broken. Its own tree still gives the compile
    step its block and the check of a draft's names the top level's names, so Python's check
    parses the document no more where the compile step decides, with the verdicts it gives
    without the tree; where tree-sitter must judge (another language), the broken document's
    errors come from a parse from scratch, as before."""
    before = "import os\n\nLIMIT = 3\n\ndef f(x):\n    y = "  # the line being typed
    after = "\n    return y\n\ndef g():\n    return os.sep\n"
    tree = syntax.parser_for("python").parse((before + after).encode())  # type: ignore[union-attr]
    assert tree.root_node.has_error
    texts = ["x + LIMIT", "x + nowhere", "x + os.sep.count(x)"]
    given = Check(Around(before, after, tree=tree), "python")
    verdicts = [(given.clean(t), given.reads_unbound(t)) for t in texts]
    assert parsed == []  # the compile step decided every one: no parse of the document
    alone = Check(Around(before, after), "python")
    assert verdicts == [(alone.clean(t), alone.reads_unbound(t)) for t in texts]
    assert verdicts[1][1] is True and verdicts[0][1] is False  # `nowhere` is bound nowhere
    go_before, go_after = "package p\n\nfunc f(x int) int {\n\ty := ", "\n\treturn y\n}\n"
    go_tree = syntax.parser_for("go").parse((go_before + go_after).encode())  # type: ignore[union-attr]
    assert Check(Around(go_before, go_after, tree=go_tree), "go").clean("x + 1")
    assert parsed[-1] == (go_before + go_after).encode()
