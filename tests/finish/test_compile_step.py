"""Python's compile step (finish/compiles.py, through syntax.Check and finish): a candidate that
the compiler rejects where the block it lands in compiled without it is never shown, even where
the document is broken elsewhere (the user is typing), and tree-sitter's grammar would take it."""

from __future__ import annotations

import time

import pytest

from infill_engine.finish import Around, finish
from infill_engine.finish.compiles import Block, compiles
from infill_engine.finish.syntax import Check, forget_documents

BROKEN_BELOW = "\n\ndef later(x):\n    y = (\n"  # an unclosed call the user is writing

# (document before the cursor, the candidate, after the cursor): each rejected by the compiler
REJECTED = {
    "return at module level": (
        "import db\n\n",
        'return db.insert("charges", user=user_id, amount=amount)',
        "\n",
    ),
    "yield at module level": ("import db\n\n", "yield db.rows()", "\n"),
    "await outside async": ("def f(db):\n    ", "await db.fetch()", "\n    pass\n"),
    "break outside a loop": ("def f(x):\n    if x:\n        ", "break", "\n        pass\n"),
    "continue outside a loop": ("def f(x):\n    ", "continue", "\n    pass\n"),
    "duplicate argument": ("", "def charge(user_id, user_id):\n    pass", "\n"),
    "nonlocal at module level": ("x = 1\n", "nonlocal x", "\n"),
    "return at class level": ("class A:\n    x = 1\n    ", "return self.x", "\n"),
}

# The same statements where they stand: shown.
ACCEPTED = {
    "return in a function": ("def f(db, user_id):\n    ", "return db.insert(user_id)", "\n"),
    "yield in a function": ("def f(db):\n    ", "yield db.rows()", "\n"),
    "await in async": ("async def f(db):\n    ", "rows = await db.fetch()", "\n"),
    "break in a loop": ("def f(xs):\n    for x in xs:\n        ", "break", "\n"),
    "nonlocal in a closure": ("def f():\n    x = 1\n    def g():\n        ", "nonlocal x", "\n"),
    "return in a method": (
        "class A:\n    def f(self):\n        ",
        "return self.x",
        "\n\n    def g(self):\n        return 2\n",
    ),
    "a method's body under a decorator": (
        "class A:\n    @property\n    def f(self):\n        ",
        "return self.x",
        "\n",
    ),
}


def _shown(before: str, text: str, after: str) -> str | None:
    return finish(text, before, after, "python", document=Around(before, after))


@pytest.mark.parametrize("name", sorted(REJECTED))
@pytest.mark.parametrize("tail", ["", BROKEN_BELOW])
def test_what_the_compiler_rejects_is_not_shown(name: str, tail: str) -> None:
    before, text, after = REJECTED[name]
    assert compiles(before + after + tail) == (tail == "")
    assert Check(Around(before, after + tail), "python").clean(text) is False
    shown = _shown(before, text, after + tail)  # a cut of it, at most, that compiles in place
    assert shown is None or (shown != text and compiles(before + shown + after))


@pytest.mark.parametrize("name", sorted(ACCEPTED))
@pytest.mark.parametrize("tail", ["", BROKEN_BELOW])
def test_what_it_accepts_is_shown(name: str, tail: str) -> None:
    before, text, after = ACCEPTED[name]
    assert _shown(before, text, after + tail) == text


def test_a_line_the_user_left_open_is_still_finished() -> None:
    """The block is broken by the user's own line: a text that completes it passes, one whose
    error lies in the text does not."""
    before, after = "def f(a):\n    x = ", "\n    return x\n"
    assert _shown(before, "a + 1", after) == "a + 1"
    assert Check(Around(before, after), "python").clean(")") is False


def test_the_block_is_the_method_not_the_class() -> None:
    methods = "".join(f"    def m{i}(self):\n        return {i}\n\n" for i in range(200))
    head = "class A:\n" + methods + "    def f(self, x):\n        "
    tail = "\n        return x\n\n" + methods
    parsed = Check(Around(head, tail), "python")._parsed()
    assert parsed is not None
    block = Block(head.encode(), b"", tail.encode(), parsed.tree)
    assert block.header == "if 1:\n"
    assert block.before == "    def f(self, x):\n        "
    assert block.after == "\n        return x"
    assert block.clean("return x") is True and block.clean("return x x") is False


def test_the_check_costs_a_block_not_the_document() -> None:
    """2,000 lines: the compile step compiles the function around the cursor, not the file."""
    funcs = "".join(f"def f{i}(a, b):\n    c = a + b\n    return c * {i}\n\n" for i in range(500))
    before, after = funcs + "def g(x):\n    ", "\n\n" + funcs
    assert before.count("\n") + after.count("\n") > 2000
    forget_documents()
    check = Check(Around(before, after), "python")
    assert check.clean("return x")  # the document's parse, once
    start = time.perf_counter()
    for _ in range(20):
        assert check.clean("return x") and not check.clean("return x x")
    assert (time.perf_counter() - start) / 40 < 0.005


# A hole breaks the statement it is in, and the parse of the document with the hole puts the
# block's end where the true line would not: the line is checked again up to the next statement
# at no indentation (each from held-out or standard-library holes the check used to reject).
CUT_STATEMENTS = {
    "a def's parameters": (
        "import os\n\n\ndef raises(",
        "err, lamda):",
        "\n    try:\n        lamda()\n        return False\n    except err:\n        return True\n"
        "\n\ndef other():\n    return os.sep\n",
    ),
    "a lambda among a dict's lists": (
        "info = dict(\n    iadd=[\n        lambda a, b: None],\n    imatmul=[\n        lambda a,",
        " b: None],",
        "\n    imod=[\n        lambda a, b: None],\n)\n\nlater = 1\n",
    ),
    "an import under a try": (
        "from collections.abc",
        " import Sequence, Mapping",
        "\n\ntry:\n    from .util import sentinel\nexcept ImportError:\n    sentinel = None\n",
    ),
    "a method's condition": (
        "class E(Exception):\n    @property\n    def as_dict(self):\n        if not isinstance(",
        "self.messages, dict):",
        '\n            raise TypeError("not a dict")\n        return self.messages\n\n\n'
        "class F(E):\n    pass\n",
    ),
}


@pytest.mark.parametrize("name", sorted(CUT_STATEMENTS))
def test_a_line_that_completes_a_statement_the_hole_broke_is_shown_whole(name: str) -> None:
    before, text, after = CUT_STATEMENTS[name]
    assert compiles(before + text + after)
    assert _shown(before, text, after) == text
    # what breaks the statement for good is rejected still
    assert _shown(before, text + " )", after) != text + " )"
    assert not compiles(before + text + " )" + after)


def test_the_wider_window_ends_at_the_next_statement_at_no_indentation() -> None:
    head = "x = 0\n# the next\ndef raises("
    tail = "\n    return 1\n)\nelse_ = 2\n# note\nelse:\n    pass\n\nx = 3\ny = 4\n"
    parsed = Check(Around(head, tail), "python")._parsed()
    assert parsed is not None
    block = Block(head.encode(), b"", tail.encode(), parsed.tree)
    # a closing bracket, a comment and an `else:` go on with the statement before; `else_ =`
    # is a statement of its own
    assert block.wider == ("def raises(", "\n    return 1\n)")
    big = Block(b"def f(", b"", ("\n" + "    x = 1\n" * 3000).encode(), None)
    assert big.wider is None  # past MAX_WIDE_CHARS: not compiled


def test_a_line_at_no_indentation_inside_a_string_does_not_end_the_window() -> None:
    """The wider window ends at `Interactive:`, inside the f-string, so a candidate that opens
    a string compiles in it: the whole document is what says no (markdown-it's cli/parse.py)."""
    before = "import argparse\n\n\ndef parse_args(args):\n    "
    after = (
        '\n    parser = argparse.ArgumentParser(\n        epilog=(\n            f"""\n'
        'Interactive:\n\n  $ tool\n"""\n        ),\n    )\n    return parser.parse_args(args)\n'
    )
    assert compiles(before + after) and not compiles(before + 'f"""' + after)
    check = Check(Around(before, after), "python")
    wider = check._compiled().wider
    assert wider is not None and wider[1].endswith('f"""')  # cut inside the string
    assert compiles("".join((wider[0], 'f"""', wider[1])))
    assert check.clean('f"""') is False
    assert _shown(before, '"""Parse the arguments."""', after) == '"""Parse the arguments."""'
