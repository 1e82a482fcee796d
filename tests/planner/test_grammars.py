"""The grammars package: every language loads from its pinned wheel, its queries compile and
find what the fixture in tests/data/grammars/ holds, and syntax.function_body finds the body
hole in every language."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from conftest import DATA as FIXTURE_DATA
from conftest import ROOT
from tree_sitter import Language, Parser, Query, Tree

import grammars
from infill_engine.finish import syntax
from lsp_server.commands.editing import function_bodies

DATA = FIXTURE_DATA / "grammars"
LANGUAGES = (
    "python",
    "javascript",
    "javascriptreact",
    "typescript",
    "typescriptreact",
    "go",
    "rust",
    "java",
    "c",
    "cpp",
)
CAPTURES = {
    "functions": {"function", "body", "name"},
    "blocks": {"block"},
    "empty_bodies": {"body"},
    "statements": {"statement"},
}


@dataclass(frozen=True)
class Holds:
    """What a fixture holds, counted by hand."""

    file: str
    functions: int  # named and anonymous
    names: tuple[str, ...]  # the named ones, in document order
    blocks: int
    empty_lines: tuple[int, ...]  # 1-based line of each empty body
    statements: int


FIXTURES = {
    "python": Holds(
        "sample.py",
        6,
        ("restock", "describe", "load", "total", "count_of", "todo"),
        9,  # the class body, six function bodies, the if and the with
        (19, 37),  # `...` and `pass`
        17,
    ),
    "javascript": Holds(
        "sample.js",
        7,  # and the anonymous callback of setTimeout
        ("constructor", "add", "clear", "total", "summary", "ids"),
        11,
        (19,),
        19,  # `for (const item of ...)` declares nothing on its own
    ),
    "typescript": Holds(
        "sample.ts",
        6,  # the abstract method and the interface's `run()` have no body
        ("push", "drain", "onIdle", "accepts", "makeTask", "run"),
        12,  # enum, interface, two class bodies, eight statement blocks
        (36, 46),
        12,
    ),
    "typescriptreact": Holds(
        "sample.tsx", 4, ("Counter", "increment", "Empty", "noop"), 5, (25,), 7
    ),
    "go": Holds(
        "sample.go",
        6,  # and the func literal Scale returns
        ("Area", "Area", "Reset", "Largest", "Scale"),
        11,  # two struct bodies, nine blocks
        (29,),
        11,
    ),
    "rust": Holds(
        "sample.rs",
        7,  # the trait's `fn total(&self) -> usize;` has no body
        ("describe", "new", "add", "reset", "total", "most_common", "by_count"),
        12,
        (26,),
        8,  # with four tail expressions, which have no statement node of their own
    ),
    "java": Holds(
        "Account.java",
        6,  # and the lambda auditor returns
        ("Account", "deposit", "largestDeposit", "close", "auditor"),
        10,
        (32,),
        11,
    ),
    "c": Holds(
        "sample.c",
        5,  # the prototype of ring_full is no definition
        ("ring_new", "ring_full", "ring_push", "ring_clear", "ring_free"),
        8,
        (37,),
        15,
    ),
    "cpp": Holds(
        "sample.cpp",
        6,
        ("Matrix", "at", "fill", "Matrix::transposed", "clamp_all", "clamp_one"),
        10,
        (9,),
        11,  # the for loops' `int r = 0` are not statements of their own
    ),
}


def _fixture(language_id: str) -> str:
    return (DATA / FIXTURES[language_id].file).read_text("utf-8")


def _parse(language_id: str, text: str) -> Tree:
    parser = grammars.parser(language_id)
    assert parser is not None
    return parser.parse(text.encode("utf-8"))


def test_the_manifest_lists_ten_language_ids_over_eight_grammars() -> None:
    assert grammars.language_ids() == LANGUAGES
    specs = [grammars.spec(lid) for lid in LANGUAGES]
    assert all(s is not None for s in specs)
    assert len({(s.module, s.function) for s in specs if s is not None}) == 9
    assert len({s.queries for s in specs if s is not None}) == 8
    python = grammars.spec("python")
    assert python is not None and python.block_style == "indent" and python.line_comment == "#"
    tsx = grammars.spec("typescriptreact")
    assert tsx is not None and tsx.module == "tree_sitter_typescript"
    assert tsx.function == "language_tsx" and tsx.extensions == (".tsx",)
    for s in specs[1:]:
        assert s is not None and s.block_style == "brace" and s.line_comment == "//"


@pytest.mark.parametrize("language_id", LANGUAGES)
def test_each_language_loads_from_its_pinned_wheel(language_id: str) -> None:
    spec = grammars.spec(language_id)
    assert spec is not None
    wheel = spec.module.replace("_", "-")
    assert importlib.metadata.version(wheel) == spec.version
    assert f'"{wheel}=={spec.version}"' in (ROOT / "pyproject.toml").read_text("utf-8")
    language = grammars.language(language_id)
    assert isinstance(language, Language) and grammars.language(language_id) is language
    assert isinstance(grammars.parser(language_id), Parser)
    assert grammars.parser(language_id) is grammars.parser(language_id)


@pytest.mark.parametrize(
    ("path", "language_id"),
    [
        ("a/b/tool.py", "python"),
        ("stubs.pyi", "python"),
        ("app.js", "javascript"),
        ("lib.mjs", "javascript"),
        ("Button.jsx", "javascriptreact"),
        ("index.ts", "typescript"),
        ("App.tsx", "typescriptreact"),
        ("main.go", "go"),
        ("lib.rs", "rust"),
        ("Account.java", "java"),
        ("ring.c", "c"),
        ("ring.h", "c"),
        ("matrix.cpp", "cpp"),
        ("matrix.cc", "cpp"),
        ("matrix.hpp", "cpp"),
        ("MATRIX.CPP", "cpp"),
        ("notes.txt", None),
        ("Makefile", None),
        ("archive.tar.gz", None),
    ],
)
def test_language_for_path_goes_by_the_extension(path: str, language_id: str | None) -> None:
    assert grammars.language_for_path(path) == language_id


@pytest.mark.parametrize("language_id", LANGUAGES)
@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_every_query_compiles_with_its_captures(language_id: str, name: str) -> None:
    query = grammars.query(language_id, name)
    assert isinstance(query, Query) and grammars.query(language_id, name) is query
    names = {query.capture_name(i) for i in range(query.capture_count)}
    assert names == CAPTURES[name]


@pytest.mark.parametrize("language_id", sorted(FIXTURES))
def test_the_queries_find_what_the_fixture_holds(language_id: str) -> None:
    holds, text = FIXTURES[language_id], _fixture(language_id)
    root = _parse(language_id, text).root_node
    assert not root.has_error

    functions = grammars.captures(language_id, "functions", root)
    assert len(functions["function"]) == len(functions["body"]) == holds.functions
    assert tuple(n.text.decode() for n in functions["name"] if n.text) == holds.names
    for function, body in zip(functions["function"], functions["body"], strict=True):
        assert function.start_byte <= body.start_byte and body.end_byte <= function.end_byte

    blocks = grammars.captures(language_id, "blocks", root)["block"]
    assert len(blocks) == holds.blocks

    empty = grammars.captures(language_id, "empty_bodies", root)["body"]
    assert tuple(n.start_point.row + 1 for n in empty) == holds.empty_lines
    assert all(any(n == b for b in blocks) for n in empty)  # an empty body is a block too

    statements = grammars.captures(language_id, "statements", root)["statement"]
    assert len(statements) == holds.statements
    assert not any(n.type.endswith(("function_definition", "function_item")) for n in statements)


def test_a_function_matched_twice_is_listed_once() -> None:
    # the arrow function matches as an arrow function and as the value of `handler`
    root = _parse("javascript", "const handler = () => {\n  go();\n};\n").root_node
    found = grammars.captures("javascript", "functions", root)
    assert [n.type for n in found["function"]] == ["arrow_function"]
    assert [n.text for n in found["name"]] == [b"handler"]


def test_jsx_and_tsx_parse_and_find_components() -> None:
    jsx = "export function App() {\n  return <div className='x'>{1}</div>;\n}\n"
    for language_id in ("javascriptreact", "typescriptreact"):
        root = _parse(language_id, jsx).root_node
        assert not root.has_error
        names = grammars.captures(language_id, "functions", root)["name"]
        assert [n.text for n in names] == [b"App"]
    # the same text is no TypeScript: `<div` reads as a type assertion
    assert _parse("typescript", jsx).root_node.has_error


# (marker inside the body, the function's name, the hole's text, its indentation)
INSIDE = {
    "python": (
        "raise ValueError",
        "restock",
        '        if amount < 0:\n            raise ValueError("negative amount")\n'
        "        self.count += amount",
        "        ",
    ),
    "javascript": (
        "this.items = []",
        "constructor",
        "    this.owner = owner;\n    this.items = [];\n",
        "    ",
    ),
    "typescript": ("task.id >= 0", "accepts", "    return task.id >= 0;\n", "    "),
    "typescriptreact": ("setValue((v)", "increment", "    setValue((v) => v + 1);\n", "    "),
    "go": ("r.W * r.H", "Area", "\treturn r.W * r.H\n", "\t"),
    "rust": ("a.1.cmp", "by_count", "        a.1.cmp(b.1)\n", "        "),
    "java": ("this.owner = owner", "Account", "        this.owner = owner;\n", "        "),
    "c": ("free(r)", "ring_free", "    free(r->data);\n    free(r);\n", "    "),
    "cpp": (
        "std::fill(",
        "fill",
        "        std::fill(data_.begin(), data_.end(), value);\n",
        "        ",
    ),
}


@pytest.mark.parametrize("language_id", sorted(INSIDE))
def test_function_body_inside_a_body(language_id: str) -> None:
    marker, name, body, indent = INSIDE[language_id]
    text = _fixture(language_id)
    hole = function_bodies.function_body(text, text.index(marker) + 2, language_id)
    assert hole is not None and hole.name == name and hole.indent == indent
    assert text[hole.start : hole.end] == body


# An empty body on one line: an empty hole just inside the braces, one level in.
EMPTY = {
    "javascript": ("clear() {", "clear", "    "),
    "typescript": ("onIdle(): void {", "onIdle", "    "),
    "go": ("Reset() {", "Reset", "\t"),
    "rust": ("reset(&mut self) {", "reset", "        "),
    "java": ("close() {", "close", "        "),
    "c": ("ring_clear(struct ring *r) {", "ring_clear", "    "),
    "cpp": ("0.0) {", "Matrix", "        "),
}


@pytest.mark.parametrize("language_id", sorted(EMPTY))
def test_function_body_of_an_empty_body(language_id: str) -> None:
    marker, name, indent = EMPTY[language_id]
    text = _fixture(language_id)
    inside = text.index(marker) + len(marker)  # between the braces
    hole = function_bodies.function_body(text, inside, language_id)
    assert hole is not None and (hole.start, hole.end) == (inside, inside)
    assert hole.name == name and hole.indent == indent


def test_function_body_of_a_one_line_body_is_between_the_braces() -> None:
    text = _fixture("cpp")
    hole = function_bodies.function_body(text, text.index("data_[r *"), "cpp")
    assert hole is not None and hole.name == "at"
    assert text[hole.start : hole.end] == "return data_[r * cols_ + c];"


# A function whose body is a blank line the cursor sits on, as the user is about to write it.
BLANK = {
    "python": 'def f(a):\n    """Doc."""\n    \n',
    "javascript": "function f(a) {\n    \n}\n",
    "javascriptreact": "const f = (a) => {\n    \n};\n",
    "typescript": "function f(a: number): number {\n    \n}\n",
    "typescriptreact": "export const f = (a: number): number => {\n    \n};\n",
    # one level is a tab here because the document says so
    "go": "package p\n\nfunc f(a int) int {\n\t\n}\n\nfunc g() {\n\tf(1)\n}\n",
    "rust": "fn f(a: i32) -> i32 {\n    \n}\n",
    "java": "class A {\n    int f(int a) {\n        \n    }\n}\n",
    "c": "int f(int a) {\n    \n}\n",
    "cpp": "namespace n {\nint f(int a) {\n    \n}\n}\n",
}


@pytest.mark.parametrize("language_id", LANGUAGES)
def test_function_body_from_the_blank_body_line(language_id: str) -> None:
    text = BLANK[language_id]
    lines = text.split("\n")
    row = next(i for i, line in enumerate(lines) if line and not line.strip())
    blank = sum(len(line) + 1 for line in lines[:row])  # where the blank line starts
    cursor = blank + len(lines[row])  # its end
    hole = function_bodies.function_body(text, cursor, language_id)
    assert hole is not None and hole.name == "f"
    if language_id == "python":  # below the docstring, where the body goes
        assert hole.start == hole.end == blank
    else:  # the blank line itself, up to the line of the closing brace
        assert (hole.start, hole.end) == (blank, cursor + 1)
        assert hole.indent == text[blank:cursor]  # the opening line's plus one level


# A place outside every function.
OUTSIDE = {
    "python": "import json",
    "javascript": "TAX_RATE = 0.2",
    "typescript": "High,",
    "typescriptreact": "label?: string",
    "go": "Radius float64",
    "rust": "counts: HashMap",
    "java": "private long balance",
    "c": "size_t cap;",
    "cpp": "int rows_;",
}


@pytest.mark.parametrize("language_id", sorted(OUTSIDE))
def test_function_body_is_none_outside_functions(language_id: str) -> None:
    text = _fixture(language_id)
    assert (
        function_bodies.function_body(text, text.index(OUTSIDE[language_id]) + 2, language_id)
        is None
    )
    assert function_bodies.function_body(text, 0, language_id) is None


@pytest.mark.parametrize("language_id", LANGUAGES)
def test_syntax_services_for_every_language(language_id: str) -> None:
    text = BLANK[language_id]
    assert syntax.parser_for(language_id) is grammars.parser(language_id)
    assert syntax.parses(text, language_id) is True
    assert syntax.error_count(text, language_id) == 0
    broken = text + ")\n"  # an unbalanced parenthesis
    assert syntax.parses(broken, language_id) is False
    assert (syntax.error_count(broken, language_id) or 0) >= 1


def test_an_unknown_language_yields_none_everywhere() -> None:
    assert grammars.spec("cobol") is None
    assert grammars.language("cobol") is None and grammars.parser("cobol") is None
    assert grammars.query("cobol", "functions") is None
    assert grammars.language_for_path("PAYROLL.CBL") is None
    root = _parse("python", "x = 1\n").root_node
    assert grammars.captures("cobol", "functions", root) == {}
    assert syntax.parser_for("cobol") is None and syntax.parses("x", "cobol") is None
    assert syntax.error_count("x", "cobol") is None
    assert function_bodies.function_body("x", 0, "cobol") is None


def test_a_missing_or_odd_query_name_yields_none() -> None:
    assert grammars.query("python", "no_such_query") is None
    assert grammars.query("python", "../python/functions") is None
    root = _parse("python", "x = 1\n").root_node
    assert grammars.captures("python", "no_such_query", root) == {}


@pytest.fixture
def fresh_caches() -> Iterator[None]:
    for cached in (grammars.language, grammars.parser, grammars.query):
        cached.cache_clear()
    yield
    for cached in (grammars.language, grammars.parser, grammars.query):
        cached.cache_clear()


@pytest.mark.usefixtures("fresh_caches")
def test_a_wheel_that_cannot_be_imported_yields_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tree_sitter_go", None)  # import raises ImportError
    assert grammars.spec("go") is not None
    assert grammars.language("go") is None and grammars.parser("go") is None
    assert grammars.query("go", "functions") is None
    assert function_bodies.function_body("func f() {\n}\n", 12, "go") is None
    assert syntax.parses("package p\n", "go") is None


def test_a_text_without_a_language_is_guessed_from_what_parses() -> None:
    """llama.cpp's /infill names no language: the first grammar that parses the text around the
    cursor (as it is, or with a name in the hole) is its language; plain text has none."""
    cases = [
        ("def add(a, b):\n    return ", "\n", "python"),
        ("x = ", "\n", "python"),
        ("package main\n\nfunc f() int {\n\treturn ", "\n}\n", "go"),
        ("const f = (b) => {\n  return ", "\n};\n", "javascript"),
        ("public class A {\n  int f() {\n    return ", ";\n  }\n}\n", "java"),
        ("Dear reader, this is ", "prose, not code.\n", None),
        ("", "   \n", None),
    ]
    for before, after, want in cases:
        assert grammars.guess(before + after, len(before)) == want, before
