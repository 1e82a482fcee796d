"""The next-edit core: a document's edits coalesced as a person names them (history.py), the
structural candidates after the last one (structure.py) and the gate (suggestion.py)."""

from __future__ import annotations

import pytest

import grammars
from infill_engine.edits import Edit, History, Suggestion
from infill_engine.edits.history import MAX_EDIT_CHARS
from infill_engine.edits.structure import candidates
from infill_engine.edits.suggestion import gate


def typed(text: str, at: int, word: str, history: History) -> str:
    """`word` typed into text at `at` one key at a time."""
    for i, ch in enumerate(word):
        history.record(text, at + i, at + i, ch)
        text = text[: at + i] + ch + text[at + i :]
    return text


def replaced(text: str, start: int, end: int, new: str, history: History) -> str:
    history.record(text, start, end, new)
    return text[:start] + new + text[end:]


def test_keystrokes_on_one_word_are_one_edit_and_an_undo_is_none() -> None:
    h = History()
    text = replaced("def area(w, h):\n    return w * h\n", 9, 10, "", h)
    text = typed(text, 9, "width", h)
    assert h.edits() == [Edit(9, "w", "width", "def area(", ", h):")]
    assert h.last is not None and h.last.lines_before == "def area(w, h):"
    text = replaced(text, 9, 14, "w", h)  # and back again
    assert len(h) == 0 and text.startswith("def area(w, h)")


def test_edits_elsewhere_stay_apart_and_move_with_the_text() -> None:
    h = History()
    text = replaced("a = 1\nb = 2\nc = 3\n", 16, 17, "30", h)  # c = 30
    text = replaced(text, 4, 5, "10", h)  # a = 10, before it: the first edit moves by one
    first, second = h.edits()
    assert (first.start, first.new, second.start, second.new) == (17, "30", 4, "10")
    assert text[first.start : first.end] == "30"


def test_the_history_is_bounded() -> None:
    h = History(limit=4)
    text = "x\n" * 20
    for i in range(10):
        text = replaced(text, 4 * i, 4 * i + 1, "y", h)  # every other line
    assert len(h) == 4
    text = replaced(text, 0, 0, "z" * (MAX_EDIT_CHARS * 3) + "\n", h)
    assert h.last is not None and h.last.clipped and len(h.last.new) == MAX_EDIT_CHARS
    assert candidates(text, h.edits(), "python", 0) == []  # a clipped edit implies nothing


RENAMES = {
    "python": "def area(w, h):\n    return w * h\n\ndef g(w):\n    return w\n",
    "go": "func area(w int, h int) int {\n\treturn w * h\n}\n\n"
    "func g(w int) int {\n\treturn w\n}\n",
    "rust": "fn area(w: u32, h: u32) -> u32 {\n    w * h\n}\nfn g(w: u32) -> u32 {\n    w\n}\n",
    "javascript": "function area(w, h) {\n  return w * h;\n}\nfunction g(w) {\n  return w;\n}\n",
    "typescript": "function area(w: number, h: number) {\n  return w * h;\n}\n"
    "const g = (w: number) =>\n  w;\n",
    "java": "class A {\n  int area(int w, int h) {\n    return w * h;\n  }\n"
    "  int g(int w) {\n    return w;\n  }\n}\n",
    "c": "int area(int w, int h) {\n    return w * h;\n}\nint g(int w) {\n    return w;\n}\n",
    "cpp": "int area(int w, int h) {\n    return w * h;\n}\nint g(int w) {\n    return w;\n}\n",
}


@pytest.mark.parametrize("language", sorted(RENAMES))
def test_a_renamed_parameter_s_next_reference_in_its_own_function(language: str) -> None:
    h = History()
    text = RENAMES[language]
    at = text.index("w")
    text = replaced(text, at, at + 1, "width", h)
    tree = grammars.parser(language).parse(text.encode())
    found = candidates(text, h.edits(), language, at + 5, tree)
    assert found and found[0].kind == "rename" and found[0].text == "width"
    body = text.index("\n", at) + 1
    assert body <= found[0].start < text.index("\n", body)  # the body's line, not g's
    shown = gate(found, text)
    assert shown is not None and "return width * h" in shown.applied(text).replace(
        "    width", "return width"
    )


def test_a_changed_argument_is_not_a_rename() -> None:
    """`total(a)` -> `total(b)` where b is a name in use already: nothing to carry on."""
    h = History()
    text = "a = 1\nb = 2\nprint(total(a))\nprint(a)\n"
    at = text.index("total(a") + 6
    text = replaced(text, at, at + 1, "b", h)
    found = candidates(text, h.edits(), "python", at + 1)
    assert gate(found, text) is None


def test_the_same_change_on_a_line_of_the_same_shape() -> None:
    h = History()
    text = "self.a = kwargs['a']\nself.b = kwargs['b']\nother = 1\n"
    text = replaced(text, 9, 20, "kwargs.get('a')", h)
    (s,) = [c for c in candidates(text, h.edits(), "python", 24) if c.kind == "shape"]
    assert s.applied(text).splitlines()[1] == "self.b = kwargs.get('b')"


def test_a_removed_parameter_leaves_the_call() -> None:
    h = History()
    text = "def f(a, b, c):\n    return a\n\nf(1, 2, 3)\n"
    text = replaced(text, 9, 12, "", h)
    (s,) = [c for c in candidates(text, h.edits(), "python", 9) if c.kind == "signature"]
    assert s.applied(text).endswith("f(1, 3)\n")


def test_an_argument_added_to_one_call_goes_to_the_next_call_of_that_name() -> None:
    h = History()
    text = "void f(jv v) {\n  jv_dump(jv_copy(*var));\n  other(1);\n  jv_dump(jv_copy(v));\n}\n"
    at = text.index("));") + 1
    text = replaced(text, at, at, ", 0", h)
    (s,) = [c for c in candidates(text, h.edits(), "c", at + 3) if c.kind == "call"]
    assert s.applied(text).splitlines()[3] == "  jv_dump(jv_copy(v), 0);"


def test_an_argument_removed_from_one_call_goes_from_the_next_and_a_definition_is_left() -> None:
    h = History()
    text = "def g(a, b, c):\n    pass\n\ng(x, y, z)\nn = 1\ng(p, q, r)\ng(p, q)\n"
    at = text.index("g(x") + 4
    text = replaced(text, at, at + 3, "", h)  # g(x, y, z) -> g(x, z)
    found = [c for c in candidates(text, h.edits(), "python", at) if c.kind == "call"]
    assert [c.applied(text).splitlines()[5] for c in found] == ["g(p, r)"]
    h = History()  # a definition's parameters changed: the signature rule's, not this one's
    text = replaced("def g(a, b):\n    pass\n\ng(x, y)\n", 8, 11, "", h)
    assert not [c for c in candidates(text, h.edits(), "python", 8) if c.kind == "call"]


def test_a_keyword_argument_removed_goes_by_its_keyword_and_a_series_is_surer() -> None:
    h = History()
    text = "f(a, pop=True, k=1)\nf(b, k=2)\nf(c, k=3, pop=True)\nf(d, pop=True)\n"
    at = text.index(", pop")
    text = replaced(text, at, at + len(", pop=True"), "", h)
    (s,) = [c for c in candidates(text, h.edits(), "python", at) if c.kind == "call"]
    text = replaced(text, s.start, s.end, s.text, h)
    assert text.splitlines()[2] == "f(c, k=3)" and s.score < 0.6  # the first of a series
    s = next(c for c in candidates(text, h.edits(), "python", s.start) if c.kind == "call")
    assert s.applied(text).splitlines()[3] == "f(d)" and s.score >= 0.6  # the surest


def test_a_changed_argument_or_a_second_changed_call_is_no_call_edit() -> None:
    h = History()
    text = replaced("f(a, b)\nf(c, d)\n", 5, 6, "z", h)  # same count: the replace rule's
    assert not [c for c in candidates(text, h.edits(), "python", 6) if c.kind == "call"]
    h = History()
    text = replaced("f(a) + g(b)\nf(c) + g(d)\n", 3, 11, ", 1) + g(b, 2)", h)
    assert not [c for c in candidates(text, h.edits(), "python", 3) if c.kind == "call"]
    h = History()  # the line changed outside the call as well: more than an argument
    text = "with raises(E) as e:\n    pass\nwith raises(E) as e:\n"
    text = replaced(text, 13, 19, ", match='x')", h)
    assert not [c for c in candidates(text, h.edits(), "python", 13) if c.kind == "call"]


CONDITIONAL = (
    "int a;\n#ifdef USE_X\nint b;\n#if defined(Y)\nint c;\n#endif\nint d;\n#endif /* USE_X */\n"
    "int e;\n"
)
WITHOUT_X = "int a;\nint b;\n#if defined(Y)\nint c;\n#endif\nint d;\nint e;\n"


@pytest.mark.parametrize("removed", ["#ifdef USE_X\n", "#endif /* USE_X */\n"])
def test_a_removed_conditional_line_takes_its_other_half(removed: str) -> None:
    h = History()
    at = CONDITIONAL.index(removed)
    text = replaced(CONDITIONAL, at, at + len(removed), "", h)
    (s,) = [c for c in candidates(text, h.edits(), "c", at) if c.kind == "pair"]
    assert s.applied(text) == WITHOUT_X
    assert not [c for c in candidates(text, h.edits(), "python", at) if c.kind == "pair"]


def test_a_removed_conditional_line_between_blank_lines_takes_one_of_them() -> None:
    h = History()
    text = replaced("#if X\nint b;\n\n#endif\n\nint c;\n", 0, 6, "", h)
    (s,) = [c for c in candidates(text, h.edits(), "cpp", 0) if c.kind == "pair"]
    assert s.applied(text) == "int b;\n\nint c;\n"


def test_a_conditional_with_an_else_or_left_balanced_takes_nothing() -> None:
    h = History()
    text = replaced("#ifdef X\nint b;\n#else\nint c;\n#endif\n", 0, 9, "", h)
    assert not [c for c in candidates(text, h.edits(), "c", 0) if c.kind == "pair"]
    h = History()  # the #if and its #else removed at once: a branch kept, rewritten
    text = replaced("#ifdef X\nint b;\n#else\nint c;\n#endif\n", 0, 22, "", h)
    assert not [c for c in candidates(text, h.edits(), "c", 0) if c.kind == "pair"]
    h = History()  # one of two #endif removed: the stray one, as the document is balanced now
    text = "int a;\n#if X\n#endif\n#endif\nint b;\n"
    at = text.index("#endif")
    text = replaced(text, at, at + len("#endif\n"), "", h)
    assert not [c for c in candidates(text, h.edits(), "c", at) if c.kind == "pair"]


def test_a_deleted_line_s_twin_goes_too() -> None:
    h = History()
    text = "a = 1\nprint('debug here')\nb = 2\nprint('debug here')\n"
    text = replaced(text, 6, 26, "", h)
    found = candidates(text, h.edits(), "python", 6)
    assert [c.kind for c in found] == ["twin"]
    assert found[0].applied(text) == "a = 1\nb = 2\n"


def test_an_edit_with_no_successor_implies_nothing() -> None:
    h = History()
    text = "def f(x):\n    return x\n"
    text = replaced(text, len(text), len(text), "\ny = f(2)\n", h)
    assert gate(candidates(text, h.edits(), "python", len(text)), text) is None


def test_the_gate_shows_the_surest_over_its_threshold_and_checks_every_field() -> None:
    text = "abc"
    weak = Suggestion(0, 1, "x", "shape", 0.1)
    sure = Suggestion(1, 2, "y", "rename", 0.95)
    noop = Suggestion(0, 1, "a", "rename", 0.99)  # changes nothing
    assert gate([weak, sure, noop], text) is sure
    assert gate([weak], text) is None and gate([weak], text, threshold=0.0) is weak
    with pytest.raises(ValueError, match="kind"):
        Suggestion(0, 0, "", "telepathy", 0.5)
    with pytest.raises(ValueError, match="score"):
        Suggestion(0, 0, "", "rename", float("nan"))
    with pytest.raises(ValueError, match="span"):
        Suggestion(2, 1, "", "rename", 0.5)


@pytest.mark.parametrize(
    ("language", "text", "broken", "whole"),
    [
        ("python", "def f(x):\n    y = x\n", "(x", "x + 1"),  # an unclosed bracket
        ("python", "def f(x):\n    y = x\n", "x\n    return\n  z", "x + 1"),  # a dedent
        ("python", "y = x\n", "x\nreturn y", "x + 1"),  # parses; compile() refuses it
        ("go", "package p\n\nvar y = x\n", "x +", "x + 1"),
        ("rust", "fn f() { let y = x; }\n", "x;;}", "x + 1"),
    ],
)
def test_the_gate_passes_over_an_edit_that_breaks_the_document(
    language: str, text: str, broken: str, whole: str
) -> None:
    at = text.index("= x") + 2
    sure = Suggestion(at, at + 1, broken, "rename", 0.95)
    next_best = Suggestion(at, at + 1, whole, "rename", 0.9)
    assert gate([sure, next_best], text, language_id=language) is next_best
    assert gate([sure], text, language_id=language) is None
    assert gate([sure], text) is sure  # no language given: no check
    assert gate([sure], text, language_id="plaintext") is sure  # nothing to check with


def test_a_step_of_a_change_made_in_steps_is_carried_on_though_it_breaks_the_document() -> None:
    h = History()
    loop = "    for (final Listener l : listeners) {\n        l.onStart(this);\n    }\n"
    text = "class A {\n  void start() {\n" + loop + "  }\n  void stop() {\n"
    text += loop.replace("onStart", "onStop") + "  }\n}\n"
    old = "for (final Listener l : listeners) {"
    at = text.index(old)  # the first loop's head made a lambda's; its `});` is still to come
    text = replaced(text, at, at + len(old), "listeners.forEach(l -> {", h)
    found = candidates(text, h.edits(), "java", at)
    assert gate(found, text, language_id="java") is None  # it breaks the document
    shown = gate(found, text, language_id="java", last=h.edits()[-1])  # as the user's step did
    assert shown is not None and shown.kind == "replace" and shown.start > at
    rewrite = Suggestion(shown.start, shown.end, shown.text, "hosted", 0.99)
    assert gate([rewrite], text, language_id="java", last=h.edits()[-1]) is None  # not carried


def test_an_f_taken_off_a_string_is_not_taken_off_one_with_a_placeholder() -> None:
    h = History()
    text = 'def run(n):\n    log(f"start")\n    log(f"{n} left")\n    log(f"done")\n'
    at = text.index('f"start"')
    text = replaced(text, at, at + 1, "", h)
    found = candidates(text, h.edits(), "python", at)
    assert any('"{n} left"' in s.text for s in found)  # the shape rule proposes it
    assert gate(found, text, threshold=0.0) is not None
    assert gate(found, text, threshold=0.0, language_id="python") is None
    done = text.index('f"done"')
    plain = Suggestion(done, done + 1, "", "replace", 0.9)  # no placeholder: the same edit
    assert gate([plain], text, language_id="python") is plain
    formatted = 'log(f"{n} left")'
    later = text.replace(formatted, 'log(f"{n} left".upper())')
    at = later.index('f"{n}')
    kept = Suggestion(at, later.index(".upper"), '"{n} left".format', "replace", 0.9)
    assert gate([kept], later, language_id="python") is kept  # formatted after all


def test_a_replacement_is_made_again_along_a_series() -> None:
    """A key changed on one line of a series is changed on the next line of its shape, and
    shown; the same word in a comment is left alone after an edit in code."""
    h = History()
    text = '# the timeout, in seconds\na = opts["timeout"] or 1\nx = 1\nb = opts["timeout"] or 2\n'
    at = text.index('timeout"')
    text = replaced(text, at, at + 7, "deadline", h)
    shown = gate(candidates(text, h.edits(), "python", at + 8), text)
    assert shown is not None and shown.kind == "replace"
    assert shown.applied(text).splitlines()[3] == 'b = opts["deadline"] or 2'
    assert shown.applied(text).startswith("# the timeout")


def test_a_lone_replacement_with_many_occurrences_is_unsure() -> None:
    h = History()
    text = "".join(f"v{i} = compute(data, 1)\nw{i} = other(data)\n" for i in range(8))
    at = text.index("data")
    text = replaced(text, at, at + 4, "rows", h)
    found = [c for c in candidates(text, h.edits(), "python", at + 4) if c.kind == "replace"]
    assert found and gate(found, text) is None  # `data` is everywhere: most of it stays


def test_the_smallest_replacement_leaves_out_the_common_ends() -> None:
    from infill_engine.edits.history import replacement

    assert replacement("return w * h\n", "return width * h\n") == (8, 8, "idth")
    assert replacement("a\nb\n", "a\n") == (2, 4, "")
    assert replacement("same", "same") is None
    big = "x" * 5000
    assert replacement(big + "a" + big, big + "bc" + big) == (5000, 5001, "bc")  # past a block
    assert replacement(big, big + big) == (5000, 5000, big)


def test_a_run_of_edits_goes_on_ahead_not_over_what_it_passed() -> None:
    """Two edits down the file: the occurrence between them was passed over (left as it is on
    purpose), so the next one below is proposed, though farther."""
    h = History()
    lines = ['a = opts["timeout"]', 'b = opts["timeout"]', 'c = opts["timeout"]']
    text = "\n".join([*lines, "x = 1", "y = 2", "z = 3", 'd = opts["timeout"]', ""])
    for line in (0, 2):
        at = text.index("timeout", sum(len(x) + 1 for x in lines[:line]))
        text = replaced(text, at, at + 7, "deadline", h)
    shown = gate(candidates(text, h.edits(), "python", at + 8), text)
    assert shown is not None and shown.kind == "replace"
    assert shown.applied(text).splitlines()[1::5] == ['b = opts["timeout"]', 'd = opts["deadline"]']


def test_of_a_line_holding_the_old_text_twice_the_one_in_the_edit_s_role_is_replaced() -> None:
    h = History()
    text = "total = add(total, 1)\nx = 0\ntotal = add(total, 2)\n"
    at = text.index("total, 1")
    text = replaced(text, at, at + 5, "count", h)
    (s,) = [c for c in candidates(text, h.edits(), "python", at + 5) if c.kind == "replace"]
    assert s.applied(text).splitlines()[2] == "total = add(count, 2)"


def test_an_older_edit_proposes_nothing_on_the_lines_a_later_one_wrote() -> None:
    h = History()
    text = "a = foo(1)\nc = 2\nd = 3\ne = foo(3)\n"
    text = replaced(text, 4, 7, "bar", h)
    text = replaced(text, 11, 11, "b = foo(2)\n", h)  # a line written after the rename
    line = (11, text.index("\n", 11))
    found = candidates(text, h.edits(), "python", line[1])
    assert not any(line[0] <= c.start <= line[1] for c in found)  # foo there is new: bar is not


def test_a_function_called_in_a_declaration_s_value_is_not_bound_there() -> None:
    """`p = strchr(s, c)` -> `p = strrchr(s, c)`: the declaration binds p, not strchr, so the
    other call is not renamed as surely as a binding's references are."""
    h = History()
    text = (
        "void f(char *s) {\n  char *p = strchr(s, 1);\n}\nvoid g(char *s) {\n  strchr(s, 2);\n}\n"
    )
    at = text.index("strchr")
    text = replaced(text, at, at + 6, "strrchr", h)
    tree = grammars.parser("c").parse(text.encode())
    (s,) = [c for c in candidates(text, h.edits(), "c", at + 7, tree) if c.kind == "rename"]
    assert s.text == "strrchr" and s.score < 0.6


BLOCK_LOCALS = {
    # (text, what stands before the declaration renamed, its reference in the block; the
    # same name nearer, outside the block, is another variable)
    "go": (
        "func f() {\n\terr := a()\n\tif _, err := g(); err == nil {\n\t\tx()\n\t\tx()\n"
        "\t\tuse(err)\n\t}\n}\n",
        "if _, ",
        "use(err)",
    ),
    "c": (
        "void f(int err) {\n  use(err);\n  for (int i = 0; i < 3; i++) {\n    int err = i;\n"
        "    x();\n    x();\n    use(err);\n  }\n}\n",
        "    int ",
        "use(err);\n  }",
    ),
    "javascript": (
        "function f(err) {\n  use(err);\n  if (a) {\n    let err = 1;\n    x();\n    x();\n"
        "    use(err);\n  }\n}\n",
        "let ",
        "use(err);\n  }",
    ),
}


def renames_after(text: str, old: str, at: int, new: str, language: str) -> list[Suggestion]:
    """The rename candidates after `old` at `at` of text is renamed `new` (the text as
    written is `text` with that edit: read the candidates' offsets there)."""
    h = History()
    text = replaced(text, at, at + len(old), new, h)
    tree = grammars.parser(language).parse(text.encode())
    return [c for c in candidates(text, h.edits(), language, at, tree) if c.kind == "rename"]


@pytest.mark.parametrize("language", sorted(BLOCK_LOCALS))
def test_a_renamed_block_local_is_carried_on_in_its_block_only(language: str) -> None:
    """Where names are scoped by block, a local declared in a block (or in an `if` or `for`
    header) is renamed there: the same name outside it, though nearer, is another variable."""
    text, before, inside = BLOCK_LOCALS[language]
    at = text.index(before, text.index("\n")) + len(before)
    found = renames_after(text, "err", at, "bad", language)
    assert [(c.start, c.text) for c in found] == [(text.index(inside) + 4, "bad")]


def test_a_javascript_var_is_its_function_s_and_a_blank_goes_on_as_a_series() -> None:
    text = "function f() {\n  if (a) {\n    var err = 1;\n  }\n  use(err);\n}\n"
    (s,) = renames_after(text, "err", text.index("err ="), "bad", "javascript")
    assert s.start == text.index("use(err)") + 4
    text = "func f() {\n\tif _, ok := a(); ok {\n\t}\n\tif _, ok := b(); ok {\n\t}\n}\n"
    (s,) = renames_after(text, "_", text.index("_"), "e1", "go")
    assert s.start == text.index("_, ok := b()") + 1 and s.score >= 0.85


def test_a_rename_is_carried_on_at_the_names_in_the_edit_s_role_only() -> None:
    """A member renamed on one receiver is renamed on that receiver (not `r.Context()`, another
    type's member), and a local renamed is not written over a field of the same name."""
    h = History()
    text = "func f() {\n\tvalve.Context(ctx).Open()\n\tvalve.Context(r.Context()).Stop()\n}\n"
    at = text.index("Context")
    text = replaced(text, at, at + 7, "Lever", h)
    (s,) = [c for c in candidates(text, h.edits(), "go", at) if c.kind == "rename"]
    assert s.applied(text).splitlines()[2] == "\tvalve.Lever(r.Context()).Stop()"
    h = History()
    text = "def f(size):\n    self.size = size\n"
    text = replaced(text, 6, 10, "n", h)
    tree = grammars.parser("python").parse(text.encode())
    (s,) = [c for c in candidates(text, h.edits(), "python", 7, tree) if c.kind == "rename"]
    assert s.applied(text).splitlines()[1] == "    self.size = n"


def test_a_replacement_is_not_made_again_where_the_line_reads_as_its_result() -> None:
    """`a == b` made `a.resolve() == b.resolve()`: a line that holds the new text already
    holds the old one inside it, and is passed over for the next that does not."""
    h = History()
    text = "assert x == Path(e)\nassert y.resolve() == Path(e).resolve()\nassert z == Path(e), m\n"
    at = text.index(" == Path(e)")
    text = replaced(text, at, at + 11, ".resolve() == Path(e).resolve()", h)
    (s,) = [c for c in candidates(text, h.edits(), "python", at) if c.kind == "replace"]
    assert s.applied(text).splitlines()[1:] == [
        "assert y.resolve() == Path(e).resolve()",
        "assert z.resolve() == Path(e).resolve(), m",
    ]


def test_a_name_used_all_over_a_large_file_is_read_at_its_nearest_uses_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A global renamed in a file that uses it 3,000 times: the rename and the repeat read the
    lines of the NEAREST uses ahead of the edit, not every use (149 ms a request on 14,000
    lines of C before this bound), and still propose the nearest."""
    from infill_engine.edits import repeats, structure
    from infill_engine.edits import text as text_module

    body = "int f{0}(int v) {{\n    counter += v;\n    return counter;\n}}\n"
    text = "static int counter = 0;\n" + "".join(body.format(i) for i in range(1500))
    read = 0
    tokens = text_module.tokens

    def counted(line: str) -> list[text_module.Token]:
        nonlocal read
        read += 1
        return tokens(line)

    for module in (structure, repeats):
        monkeypatch.setattr(module, "tokens", counted)
    found = renames_after(text, "counter", text.index("counter"), "total", "c")
    assert read < 3 * text_module.NEAREST  # 6,005 unbounded
    written = "static int total = 0;\n" + text[len("static int counter = 0;\n") :]
    assert [(c.start, c.text) for c in found] == [(written.index("counter"), "total")]


def test_a_line_above_the_edit_holding_the_name_twice_is_renamed_whole() -> None:
    """The nearest uses are tried first, so the nearer of a line's two uses comes first; the
    line's change still runs from its first use to its last."""
    text = "def f(a):\n    g(a, a)\n    return a\n"
    found = renames_after(text, "a", text.rindex("a"), "b", "python")
    assert [c.applied(text.replace("return a", "return b")) for c in found] == [
        "def f(a):\n    g(b, b)\n    return b\n"
    ]
