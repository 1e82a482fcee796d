"""What a command would overwrite (lsp_server/commands/stubs.py): a stub body is filled at once, a
body with code only after the user confirms. Per language, through the grammars' stubs.scm."""

from __future__ import annotations

import pytest

import grammars
from lsp_server.commands.editing import function_bodies, stubs

# (language, document, the body holds code); the cursor is just inside the function's body.
BODIES = [
    ("python", 'def clamp(v):\n    """Doc."""\n    return v\n', True),
    ("python", "def f():\n    pass\n", False),
    ("python", "def f():\n    ...\n", False),
    ("python", 'def f():\n    """Only a docstring."""\n', False),
    ("python", "def f():\n    # TODO: write it\n    raise NotImplementedError\n", False),
    ("python", 'def f():\n    raise NotImplementedError("later")\n', False),
    ("python", 'def f():\n    raise ValueError("x")\n', True),
    ("python", "def f():\n    pass\n    return 1\n", True),
    ("rust", "fn f() -> i32 {\n    todo!()\n}\n", False),
    ("rust", 'fn f() -> i32 {\n    unimplemented!("x");\n}\n', False),
    ("rust", "fn f() -> i32 {\n    // later\n}\n", False),
    ("rust", "fn f() -> i32 {\n    1 + 2\n}\n", True),
    ("rust", 'fn f() -> i32 {\n    println!("x");\n}\n', True),
    ("go", 'package m\n\nfunc f() int {\n\tpanic("not implemented")\n}\n', False),
    ("go", 'package m\n\nfunc f() int {\n\tpanic("bad input")\n}\n', True),
    ("javascript", "function f() {\n  // TODO\n}\n", False),
    ("javascript", 'function f() {\n  throw new Error("Not implemented");\n}\n', False),
    ("javascript", 'function f() {\n  throw new Error("bad input");\n}\n', True),
    ("javascript", "function f() {\n  return 1;\n}\n", True),
    ("typescript", 'function f(): number {\n  throw new Error("TODO");\n}\n', False),
    ("java", "class A {\n  int f() {\n    throw new UnsupportedOperationException();\n}}\n", False),
    ("java", "class A {\n  int f() {\n    return 2;\n  }\n}\n", True),
    ("c", "int f(void) {\n    /* TODO */\n    ;\n}\n", False),
    ("c", "int f(void) {\n    return 0;\n}\n", True),
    ("cpp", 'int f() {\n    throw std::logic_error("not implemented");\n}\n', False),
    ("cpp", "int f() {\n    return g();\n}\n", True),
]


@pytest.mark.parametrize(("language", "text", "code"), BODIES)
def test_a_function_body_is_code_or_a_stub(language: str, text: str, code: bool) -> None:
    cursor = text.index(":\n") + 2 if language == "python" else text.rindex("{") + 1
    hole = function_bodies.function_body(text, cursor, language)
    assert hole is not None
    assert stubs.holds_code(text, hole.start, hole.end, language) is code
    assert stubs.needs_confirmation(text, hole.start, hole.end, language) is code


def test_blank_text_and_languages_without_a_grammar() -> None:
    assert stubs.holds_code("a\n   \n\t\nb", 1, 8, "python") is False
    assert stubs.holds_code("TODO\n", 0, 4, "plaintext") is True  # no grammar: no stubs
    assert stubs.holds_code("", 0, 0, "plaintext") is False


def test_a_token_cut_by_the_range_is_code() -> None:
    text = "def f():\n    return value\n"
    at = text.index("value")
    assert stubs.holds_code(text, at + 2, at + 4, "python") is True


def test_only_code_outside_the_selection_needs_confirmation() -> None:
    text = "def f(x):\n    y = x + 1\n    return y\n"
    first = (text.index("    y"), text.index("    return"))
    both = (first[0], len(text) - 1)
    assert not stubs.needs_confirmation(text, *first, "python", chosen=first)
    # an edit that runs past the selection into `return y` must ask
    assert stubs.needs_confirmation(text, *both, "python", chosen=first)
    # past it into blank lines and comments only: no need
    commented = "def f(x):\n    y = x + 1\n    # done\n"
    sel = (commented.index("    y"), commented.index("    #"))
    assert not stubs.needs_confirmation(commented, sel[0], len(commented), "python", chosen=sel)


@pytest.mark.parametrize("language", grammars.language_ids())
def test_every_language_has_a_stubs_query(language: str) -> None:
    query = grammars.query(language, "stubs")
    assert query is not None
    names = {query.capture_name(i) for i in range(query.capture_count)}
    assert {n for n in names if not n.startswith("_")} == {"stub"}  # `_x`: predicates' own
