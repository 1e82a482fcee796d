"""Python's names for a draft (finish/unbound.py, through syntax.Check and decide.finished): a line
copied from elsewhere that reads a name nothing binds where it would land is no draft; one whose
names are bound in its function, its enclosing ones, the document's top level or the builtins
is."""

from __future__ import annotations

from typing import Any

import pytest
import tree_sitter
import tree_sitter_python

from infill_engine.decide import Policy, Seen, decide, vetoed
from infill_engine.drafts import Draft
from infill_engine.finish import unbound
from infill_engine.finish.syntax import Around, Check

MODULE = (
    "import os\n"
    "from typing import TYPE_CHECKING\n"
    "if TYPE_CHECKING:\n"
    "    import json as J\n"
    "for KEY in ('a', 'b'):\n"
    "    pass\n"
    "LIMIT = 10\n\n"
    "def helper():\n"
    "    global COUNTER\n"
    "    COUNTER = 0\n\n"
    "class Store:\n"
    "    kind = 'store'\n\n"
    "    def __init__(self, path, flist):\n"
    "        self.path = path\n"
    "        total = 0\n"
)
AFTER = "\n        return None\n\n\ndef later():\n    return LIMIT\n"
PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))

# The rest of a line at the cursor (indented in __init__): (reads a name nothing binds, why)
LINES = {
    "return s": (True, "s is bound nowhere"),
    "self.maxBytes = maxBytes": (True, "a parameter of another function"),
    "hlist = hlist.split(',')": (True, "bound only by the line that reads it"),
    "count += 1": (True, "an augmented assignment reads its target"),
    "self.kind = kind": (True, "a class body's name is not a method's"),
    "x = later_helper()": (True, "not defined anywhere"),
    "flist = flist.split(',')": (False, "a parameter"),
    "total += len(flist)": (False, "bound above in the function"),
    "self.path = os.path.join(path, KEY)": (False, "an import and a top-level for target"),
    "data = J.loads(self.path)": (False, "an import under a top-level if"),
    "n = LIMIT + COUNTER": (False, "an assignment and a global statement"),
    "helper(); later(); Store": (False, "functions and a class, defined below too"),
    "names = [p for p in flist if p]": (False, "a comprehension's own variable"),
    "raise ValueError(len(flist), __name__)": (False, "builtins and the module's own name"),
    "for item in flist:": (False, "a loop's head binds its target"),
}


@pytest.mark.parametrize("line", sorted(LINES))
def test_a_line_that_reads_a_name_nothing_binds_is_seen(line: str) -> None:
    check = Check(Around(MODULE + "        ", AFTER), "python")
    unbound, why = LINES[line]
    assert check.reads_unbound(line) is unbound, why


def test_a_star_import_may_bind_anything_and_a_broken_block_is_not_judged() -> None:
    star = Check(Around("from os.path import *\n\ndef f():\n    ", "\n"), "python")
    assert not star.reads_unbound("return join(dirname, name)")
    # the user's own broken line in the function: its block does not compile either way
    broken = Check(Around("def f():\n    ", "\n    return )\n"), "python")
    assert not broken.reads_unbound("return s")
    assert not Check(Around("fn main() {\n    ", "\n}\n"), "rust").reads_unbound("return s;")


def test_a_draft_that_reads_an_unbound_name_is_never_shown_and_promotes_none() -> None:
    before, after = MODULE + "        ", AFTER
    seen = Seen.whole(before + after, len(before), "python")
    found = [
        Draft("self.maxBytes = maxBytes", "workspace", 9.0, "handlers.py:10"),
        Draft("self.path = os.path.join(path, KEY)", "document", 8.0, "line 3"),
        Draft("return s", "workspace", 7.0, "other.py:4"),
        Draft("total += len(flist)", "document", 6.0, "line 9"),
    ]
    assert vetoed(found, seen, True) == {"self.maxBytes = maxBytes", "return s"}
    # Unasked, the gate reads the list as found and its best is never shown: the runner-up,
    # whose competitor it would otherwise have been, is not shown in its place.
    anything = Policy(automatic=True, trust_model=False, gate=0.0)
    assert decide([], found, seen, anything) == []
    assert [c.text for c in decide([], found[1:], seen, anything)] == [found[1].text]
    # Asked, the rest are shown in their order.
    asked = decide([], found, seen, Policy(automatic=False, trust_model=False))
    assert [c.text for c in asked] == [found[1].text, found[3].text]
    # Other languages have no symbol table here: nothing is vetoed.
    go = Seen.whole("func f() {\n\t\n}\n", 11, "go")
    assert vetoed([Draft("return s", "workspace", 9.0)], go, True) == frozenset()


def test_each_top_level_statement_is_read_once_across_copies_of_the_tree(monkeypatch: Any) -> None:
    """The server hands each request a new copy of the document's tree; the names of a top-level
    statement unchanged since the last request are not read again, and a changed one is."""
    read: list[bytes] = []
    walk = unbound._statement_names

    def counted(statement: tree_sitter.Node, text: bytes) -> frozenset[str] | None:
        read.append(text[statement.start_byte : statement.end_byte])
        return walk(statement, text)

    monkeypatch.setattr(unbound, "_statement_names", counted)
    unbound.forget()
    text = (MODULE + AFTER).encode()
    tree = PARSER.parse(text)
    names = unbound.top_level_names(tree.copy().root_node, text)
    assert names is not None and {"os", "J", "KEY", "LIMIT", "COUNTER", "helper", "Store"} <= names
    assert "total" not in names and "flist" not in names  # a method's, not the module's
    assert len(read) == len(tree.root_node.children)
    read.clear()
    unbound.top_level_names.cache_clear()  # a new request: a new copy, nothing cached for it
    assert unbound.top_level_names(tree.copy().root_node, text) == names and read == []
    typed = text.replace(b"LIMIT = 10", b"LIMITS = 10")
    changed = unbound.top_level_names(PARSER.parse(typed).root_node, typed)
    assert changed == names - {"LIMIT"} | {"LIMITS"} and read == [b"LIMITS = 10"]
    starred = b"from os import *\n" + text
    assert unbound.top_level_names(PARSER.parse(starred).root_node, starred) is None


def test_the_statements_held_are_bounded_by_their_bytes() -> None:
    held = unbound._Statements(max_bytes=100)
    text = "".join(f"NAME_{i} = {i}\n" for i in range(50)).encode()
    for node in PARSER.parse(text).root_node.children:
        assert held.names(node, text) is not None
    assert held._bytes <= 100 and 0 < len(held._held) < 50
    assert [k for _, k in held._held][-1] == b"NAME_49 = 49"  # the newest kept
