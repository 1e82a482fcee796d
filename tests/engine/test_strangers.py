"""A line draft that reads another function's own name is none (drafts/strangers.py): the
calibration code's wrong drafts copied a sibling function's line into a function that never
had its variables."""

from __future__ import annotations

import pytest

from infill_engine.drafts import gather
from infill_engine.drafts.blocks import owners
from infill_engine.drafts.strangers import binds, reads, strangers

MUX = (
    "package mux\n"
    "\n"
    "func (r *Router) Use(mwf ...MiddlewareFunc) {\n"
    "\tfor _, handler := range mwf {\n"
    "\t\tr.middlewares = append(r.middlewares, handler)\n"
    "\t}\n"
    "}\n"
    "\n"
    "func (r *Router) useInterface(mw middleware) {\n"
    "\t\n"
    "}\n"
)


def test_a_siblings_line_is_no_draft_where_its_names_are_not_bound() -> None:
    offset = MUX.index("\t\n}", MUX.index("useInterface")) + 1
    assert strangers(MUX, offset, {"handler", "mwf", "r", "middlewares"}) == {"handler", "mwf"}
    texts = [d.text for d in gather(MUX, offset, python=False)]
    assert "r.middlewares = append(r.middlewares, handler)" not in texts
    # the same line where its names are bound: a draft
    own = MUX.replace("useInterface(mw middleware)", "useAll(handler MiddlewareFunc)")
    offset = own.index("\t\n}", own.index("useAll")) + 1
    texts = [d.text for d in gather(own, offset, python=False)]
    assert "r.middlewares = append(r.middlewares, handler)" in texts


def test_python_a_parameter_of_another_function_is_a_stranger() -> None:
    doc = (
        "def area(width, height):\n"
        "    total = width * height\n"
        "    return total\n"
        "\n"
        "def volume(w, h, d):\n"
        "    size = w * h * d\n"
        "    "
    )
    names = {"width", "height", "total", "w", "size"}
    assert strangers(doc, len(doc), names) == {"width", "height", "total"}
    texts = [d.text for d in gather(doc, len(doc))]
    assert "total = width * height" not in texts and "return total" not in texts


def test_names_of_many_functions_and_of_the_module_are_nobodys() -> None:
    fns = "".join(
        f"func f{i}(ctx Context) error {{\n\terr := run{i}(ctx)\n\treturn err\n}}\n\n"
        for i in range(3)
    )
    doc = "var limit = 3\n\n" + fns + "func g(limit int) error {\n\t"
    away = strangers(doc, len(doc), {"err", "ctx", "limit"})
    assert "err" not in away and "ctx" not in away  # in three functions: a convention
    assert "limit" not in away  # the module's own
    assert "return err" in [d.text for d in gather(doc, len(doc), python=False)]


def test_text_with_no_function_has_no_strangers() -> None:
    doc = "a = 1\nb = a + 1\n"
    assert strangers(doc, len(doc), {"a", "b"}) == frozenset()


@pytest.mark.parametrize(
    ("line", "bound"),
    [
        ("x = 1", {"x"}),
        ("x: int = 0", {"x"}),
        ("a, b := f()", {"a", "b"}),
        ("let total = 0;", {"total"}),
        ("int count = 0;", {"count"}),
        ("self.x = 1", set()),
        ("a[i] = 2", set()),
        ("f(a=1)", set()),
        ("if x == 1:", set()),
        ("x += 1", set()),
        ("y <= 2", set()),
        ("for k, v in items.items():", {"k", "v"}),
        ("for (const name of names) {", {"name"}),
        ("for i := range rows {", {"i"}),
        ("except ValueError as exc:", {"exc"}),
        ("with open(path) as fh:", {"fh"}),
        ("key = lambda row, n: row[n]", {"key", "row", "n"}),
    ],
)
def test_what_a_line_binds(line: str, bound: set[str]) -> None:
    assert binds(line) == bound


def test_what_a_line_reads_leaves_out_members_calls_literals_and_its_own_names() -> None:
    assert reads("total = self.size + helper(n) + None") == {"n"}
    assert reads("return nil, err") == {"err"}


def test_a_nested_function_belongs_to_the_outermost() -> None:
    text = (
        "x = 1\n"
        "def outer(a):\n"
        "    def inner(b):\n"
        "        return b\n"
        "    return inner\n"
        "y = 2\n"
        "func f() {\n"
        "}\n"
    )
    assert owners(text.splitlines()) == [-1, 1, 1, 1, 1, -1, 6, 6]


def test_a_head_over_several_lines_is_owned_from_its_first_row() -> None:
    # the head is a function's from its last line on (one pass reads it so); its body and the
    # closing line belong to the head's first row
    text = "const f = (\n  a: number,\n): number => {\n  return a;\n};\nconst g = 1;\n"
    assert owners(text.splitlines()) == [-1, -1, 0, 0, 0, -1]


def test_an_import_reads_nothing_it_binds_its_names() -> None:
    assert reads("import { asyncScheduler } from '../scheduler/async';") == set()
    assert reads("from os import path") == set()


def test_a_line_reads_not_what_it_binds_by_a_loop_or_as() -> None:
    assert reads("for item in items:") == {"items"}
    assert reads("except OSError as err: pass") == {"OSError"}
    assert reads("total = sum(x * w for x in xs)") == {"w", "xs"}


# `data` is a parameter of three functions and `read_all` mentions it nowhere.
SENDER = (
    "".join(f"def send{i}(self, data):\n    self.sock.sendall(data)\n\n" for i in range(3))
    + "def read_all(self, readable):\n    "
)


def test_python_a_name_many_other_functions_bind_is_still_a_stranger() -> None:
    # In Python a bare name a function reads is its own, its module's or a builtin: however
    # many other functions bind `data`, read_all reads no such name.
    assert strangers(SENDER, len(SENDER), {"data", "readable"}, python=True) == {"data"}
    assert "self.sock.sendall(data)" not in [d.text for d in gather(SENDER, len(SENDER))]
    # elsewhere a name of that many functions may be a convention or a field: nobody's own
    assert strangers(SENDER, len(SENDER), {"data"}) == frozenset()
    assert "self.sock.sendall(data)" in [d.text for d in gather(SENDER, len(SENDER), python=False)]
    # read_all's own parameter of that name: a draft again
    own = SENDER.replace("readable", "data")
    assert "self.sock.sendall(data)" in [d.text for d in gather(own, len(own))]


def test_python_an_except_target_of_another_function_is_a_stranger() -> None:
    doc = (
        "def load(path):\n"
        "    try:\n"
        "        return open(path).read()\n"
        "    except OSError as exc:\n"
        "        log(exc)\n"
        "\n"
        "def save(path, text):\n"
        "    "
    )
    assert strangers(doc, len(doc), {"exc", "path"}, python=True) == {"exc"}
