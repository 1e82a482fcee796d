"""Drafts fit the block they land in (drafts/lines.py `fits_scope`, drafts/bodies.py
`names_a_parameter`), and what the compiler rejects is not shown through `decide` (the user's
reports: a `return` at module level, an unrelated `raise` as a function's body)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from infill_engine.decide import Policy, Seen, decide
from infill_engine.drafts import Cursor, LineIndex, gather
from infill_engine.drafts.blocks import in_functions
from infill_engine.drafts.bodies import bodies, names_a_parameter, parameters
from infill_engine.drafts.lines import candidates
from infill_engine.drafts.weights import Weights

NGRAM = [f.name for f in fields(Weights)].index("ngram")

OTHER = (
    "import db\n"
    "\n"
    "\n"
    "def charge(user_id, amount):\n"
    '    return db.insert("charges", user=user_id, amount=amount)\n'
    "\n"
    "\n"
    "class Account:\n"
    "    def add(self, amount):\n"
    "        self.total += amount\n"
    "        return self.total\n"
)


@pytest.mark.parametrize(
    ("text", "row", "inside"),
    [
        (OTHER, 4, True),  # a function's return
        (OTHER, 9, True),  # a method's statement
        (OTHER, 8, False),  # the method's head stands in the class
        (OTHER, 0, False),
        ("def f(\n    a,\n) -> int:\n    return a\n", 3, True),  # a head over several lines
        ("if x:\n    y = 1\n", 1, False),  # a module-level block
        ("func f(a int) int {\n\treturn a\n}\n", 1, True),
        ("class A {\n  int x = 0;\n  int f(int a) {\n    return a;\n  }\n}\n", 1, False),
        ("class A {\n  int x = 0;\n  int f(int a) {\n    return a;\n  }\n}\n", 3, True),
        ("int f(int a) {\n  if (a) {\n    return a;\n  } else {\n    return 0;\n  }\n}\n", 4, True),
        ("describe('x', () => {\n  it('y', () => {\n    expect(1);\n  });\n});\n", 2, True),
        # an arrow function whose head is over several lines: made one by its last line
        ("export const f = (\n  a: number,\n): number => {\n  return a;\n};\n", 3, True),
        ("export const f = (\n  a: number,\n): number => {\n  return a;\n};\n", 1, False),
        ("const rows = [\n  1,\n];\nreturn rows;\n", 3, False),  # brackets open no function
        # a generator method's body; a block comment's inner lines open nothing
        ("class T {\n  *walk(node) {\n    yield node;\n  }\n}\n", 2, True),
        ("class T {\n  /**\n   * walk(node) {\n   */\n  x = 1;\n}\n", 4, False),
    ],
)
def test_what_stands_in_a_function(text: str, row: int, inside: bool) -> None:
    assert in_functions(text.split("\n"))[row] is inside


def test_a_functions_statement_is_not_drafted_at_module_level() -> None:
    other = LineIndex.build("other.py", "extra", OTHER)
    for typed in ("", "return db", "self.t"):
        doc = "import db\n\nuser_id, amount = 1, 2\n" + typed
        cur = Cursor.at(doc, len(doc))
        assert not cur.in_function
        # whole lines; a continuation of the typed words inside another line (n-gram lookup)
        # is no statement and may still come
        assert [d for d in candidates(cur, [other]) if not d.features[NGRAM]] == [], typed
    # in a function, the same lines are drafts
    doc = "import db\n\ndef pay(user_id, amount):\n    return db"
    cur = Cursor.at(doc, len(doc))
    assert cur.in_function
    texts = [d.text for d in candidates(cur, [other])]
    assert '.insert("charges", user=user_id, amount=amount)' in texts


def test_a_methods_statement_is_not_drafted_in_a_class_body() -> None:
    doc = "class Ledger:\n    total = 0\n    "
    cur = Cursor.at(doc, len(doc))
    assert not cur.in_function
    other = LineIndex.build("other.py", "extra", OTHER)
    assert not any(d.text.startswith("self.") for d in candidates(cur, [other]))


def test_the_module_level_return_is_never_shown() -> None:
    """The user's report: at module level, `return db.insert(...)` was offered as ghost text."""
    doc = "import db\n\nuser_id, amount = 1, 2\n"
    found = gather(doc, len(doc), extra=[("other.py", OTHER)])
    seen = Seen.whole(doc, len(doc), "python")
    for automatic in (True, False):
        shown = decide([], found, seen, Policy(automatic=automatic, trust_model=False, gate=0.0))
        assert not any("return" in c.text for c in shown), shown
    # and a model's fill of it is not shown either, even asked for
    fill = 'return db.insert("charges", user=user_id, amount=amount)'
    shown = decide([fill], [], seen, Policy(automatic=False, trust_model=True))
    assert not any(c.text.startswith("return") for c in shown), shown


@pytest.mark.parametrize(
    ("opener", "names"),
    [
        ("def charge(user_id, amount):", {"user_id", "amount"}),
        ("def add(self, amount: int = 0) -> int:", {"amount", "int"}),
        ("async def get(cls, *args, **kwargs):", {"args", "kwargs"}),
        ("func (s *Server) Get(id int) error {", {"s", "Server", "id", "int"}),
        ("public int charge(String userId, int amount) {", {"String", "userId", "int", "amount"}),
        ("fn charge(&mut self, amount: u64) -> u64 {", {"amount", "u64"}),
        ("} else if (ready(x)) {", set()),  # control: no parameters
        ("if ready(x):", set()),
        ("class Account(Base):", set()),
        ("def run():", set()),
        (") -> int:", set()),  # the parameters stand on the lines above
    ],
)
def test_the_parameters_of_an_opener(opener: str, names: set[str]) -> None:
    assert parameters(opener) == names


def test_a_body_names_one_of_its_parameters() -> None:
    opener = "def charge(user_id, amount):"
    assert names_a_parameter("    db.insert(user_id)\n    log()", opener)
    assert not names_a_parameter('raise ValueError("user_id is required")', opener)
    assert names_a_parameter('raise ValueError("none")', "def run():")  # none to name


def test_an_unrelated_body_is_not_drafted() -> None:
    """The user's report: `raise ValueError("user_id is required")` offered as the body of a
    function whose signature it names nothing of."""
    other = (
        "def charge(amount, currency):\n"
        '    log("charging")\n'
        '    raise ValueError("user_id is required")\n'
        "\n"
        "def charge(amount, currency):\n"
        "    total = amount * rate(currency)\n"
        "    return total\n"
    )
    doc = "def charge(amount, currency):\n    \n\nx = 1\n"
    cur = Cursor.at(doc, doc.index("\n") + 5)
    found = bodies(cur, [LineIndex.build("other.py", "extra", other)])
    assert [d.text.split("\n")[0] for d in found] == ["total = amount * rate(currency)"]


def test_a_brace_language_body_names_a_parameter_too() -> None:
    opener = "func charge(id int, amount int) error {"
    other = (
        f"{opener}\n"
        '\tlog.Print("charging")\n'
        '\treturn errors.New("user_id is required")\n'
        "}\n"
        "\n"
        f"{opener}\n"
        "\ttotal := amount * 2\n"
        "\treturn save(id, total)\n"
        "}\n"
    )
    doc = f"package p\n\n{opener}\n\t\n}}\n"
    cur = Cursor.at(doc, doc.index("\t\n") + 1)
    found = bodies(cur, [LineIndex.build("other.go", "extra", other)])
    assert [d.text.split("\n")[0] for d in found] == ["total := amount * 2"]
