"""No automatic completion inside comments and strings (lsp_server/completion/cursor.py), per
language, from the document's tree-sitter tree."""

from __future__ import annotations

import pytest

import grammars
from lsp_server.completion.cursor import in_comment_or_string

# (language, text with | at the cursor, inside a comment or string)
CASES = [
    ("python", "x = 1  # a note|\n", True),
    ("python", "x = 1  # a| note\n", True),
    ("python", "x = 1|  # a note\n", False),
    ("python", 's = "ab|c"\n', True),
    ("python", 's = "abc"|\n', False),
    ("python", 's = |"abc"\n', False),
    ("python", 'd = """doc\nmo|re"""\n', True),
    ("python", 'y = f"a{b|}c"\n', False),
    ("python", "def f():\n    |\n", False),
    ("python", "|x = 1\n", False),
    ("javascript", "let a = 1; // later|\n", True),
    ("javascript", "let a = 1; /* c */|\n", False),
    ("javascript", "let a = 1; /* c| */\n", True),
    ("javascript", "let a = `x${y|}z`;\n", False),
    ("javascript", "let a = `x|${y}z`;\n", True),
    ("typescript", "const s: string = 'he|llo';\n", True),
    ("rust", 'fn f() { let s = "r|aw"; }\n', True),
    ("rust", "fn f() {\n    /// doc|\n}\n", True),
    ("rust", "fn f() {\n    let x = 1;|\n}\n", False),
    ("go", "package m\n\n// Doc comment|\nfunc f() {}\n", True),
    ("go", "package m\n\nvar s = `ra|w`\n", True),
    ("c", 'char *s = "x|"; /* c */\n', True),
    ("c", "int a = 1;| /* c */\n", False),
    ("java", 'class A { String s = "a|b"; }\n', True),
    ("cpp", "int a = 1; // n|\n", True),
]


@pytest.mark.parametrize(("language", "marked", "inside"), CASES)
def test_comment_or_string_at_the_cursor(language: str, marked: str, inside: bool) -> None:
    offset = marked.index("|")
    text = marked.replace("|", "", 1)
    parser = grammars.parser(language)
    assert parser is not None
    tree = parser.parse(text.encode())
    assert in_comment_or_string(tree, text, offset) is inside


def test_without_a_tree_every_position_is_code() -> None:
    assert in_comment_or_string(None, "# note", 6) is False
