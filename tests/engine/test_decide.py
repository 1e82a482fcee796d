"""The one decision of what is shown (infill_engine/decide.py), on its own: no model, no server.

Every front calls it (the language server, `fill`, the service's routes); the end-to-end tests
of each front check that they answer what it decides (tests/lsp/test_lsp_drafts.py,
tests/service/test_http_clients.py, tests/engine/test_cli_fill.py)."""

from __future__ import annotations

import pytest

from infill_engine.decide import Policy, Seen, decide, trusted, vetoed
from infill_engine.drafts import Draft, gather
from infill_engine.drafts.imports import adds_nothing, imports_and_uses
from infill_engine.finish import Indent

# a body under the same opener in another file, indented by 4 spaces
SOURCE = (
    "def send_users(items):\n"
    "    for item in items:\n"
    "        if item.ready:\n"
    "            item.send()\n"
    "            log(item)\n"
    "    return items\n"
)


@pytest.mark.parametrize(
    ("unit", "editor"),
    [
        ("\t", Indent("\t", 1)),
        ("\t", None),  # the editor sent no formatting options: read from the document
        ("  ", Indent(" ", 2)),
        ("    ", Indent(" ", 4)),
        ("        ", Indent(" ", 8)),
        ("  ", None),
    ],
)
def test_a_body_from_a_4_space_file_reads_in_the_documents_own_indentation(
    unit: str, editor: Indent | None
) -> None:
    doc = "from util import log\n\n"  # the body's names are bound here too
    doc += f"def send_groups(items):\n{unit}for item in items:\n{unit * 2}\n{unit}return items\n"
    offset = doc.index(f"items:\n{unit * 2}") + len(f"items:\n{unit * 2}")
    found = gather(doc, offset, (("users.py", SOURCE),))
    chosen = decide(
        [], found, Seen.whole(doc, offset, "python"), Policy(False, False, indent=editor)
    )
    bodies = [c.text for c in chosen if "\n" in c.text]
    inner = unit * 3
    assert bodies == [f"if item.ready:\n{inner}item.send()\n{inner}log(item)"]
    if unit == "\t":
        assert " " not in bodies[0].replace("if item.ready", "")  # tabs only


HOLE = "def load(db):\n    rows = db.query('x')\n    \n    return result\n"
CURSOR = HOLE.index("    \n") + 4
LINE = "result = [dict(r) for r in rows]"


def test_an_untrusted_models_fills_are_never_shown_unasked_and_that_is_known_first() -> None:
    policy = Policy(automatic=True, trust_model=False, gate=0.0)
    assert not policy.model_shown
    sure = Draft(LINE, "workspace", 3.0)
    chosen = decide(["x = 1"], [sure], Seen.whole(HOLE, CURSOR, "python"), policy)
    assert [(c.text, c.source) for c in chosen] == [(LINE, "workspace")]
    # asked for, the model's fill is shown too, after the drafts (it is not trusted)
    asked = decide(["x = 1"], [sure], Seen.whole(HOLE, CURSOR, "python"), Policy(False, False))
    assert [c.source for c in asked] == ["workspace", "model"]
    assert Policy(automatic=True, trust_model=True).model_shown
    assert Policy(automatic=False, trust_model=False).model_shown


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_asked_on_an_empty_line_code_comes_before_a_comment_alone(language: str) -> None:
    mark = "#" if language == "python" else "//"
    header = Draft(f"{mark} Rule Definition", "workspace", 4.0)  # recurs: it scores best
    code = Draft("result = rows", "workspace", 3.0)
    hole = HOLE if language == "python" else "function load(db) {\n  rows = db.query(1);\n  \n}\n"
    at = CURSOR if language == "python" else hole.index("  \n}") + 2
    asked = decide([], [header, code], Seen.whole(hole, at, language), Policy(False, False))
    assert [c.text for c in asked] == ["result = rows", header.text]
    doc = "def f(rows):\n    total = len(rows)\n    return total\n"
    typed = Seen.whole(doc, doc.index("\n    return"), "python")  # typed: the scores' order
    drafts = [Draft("  # all of them", "workspace", 4.0), Draft(" + 1", "workspace", 3.0)]
    assert [c.text for c in decide([], drafts, typed, Policy(False, False))] == [
        d.text for d in drafts
    ]


def test_nothing_shown_adds_a_syntax_error_or_repeats_the_suffix() -> None:
    seen = Seen.whole(HOLE, CURSOR, "python")
    trusting = Policy(automatic=False, trust_model=True)
    chosen = decide(['return db"', "result = (", "result = {'a': "], [], seen, trusting)
    assert chosen and all(c.text not in ("result = (", "result = {'a': ") for c in chosen)
    for c in chosen:  # each, in place, leaves the document compiling
        compile(HOLE[:CURSOR] + c.text + HOLE[CURSOR:], "hole.py", "exec")
    chosen = decide(["result = rows\n    return result"], [], seen, trusting)
    assert [c.text for c in chosen] == ["result = rows"]  # the suffix's own line is cut


MODULE = (
    "import os\n"
    "\n"
    "import sys\n"
    "\n"
    "\n"
    "def run(path):\n"
    "    return os.path.join(sys.prefix, json.dumps(path))\n"
    "\n"
    "\n"
    "def usage():\n"
    '    """Call as: import re"""\n'
    "    import shutil as sh\n"
    "    return sh\n"
)
AT = MODULE.index("\n\nimport sys") + 1  # the blank line between the two imports


@pytest.mark.parametrize(
    ("line", "asked", "unasked"),
    [
        ("import json", True, True),  # the code reads json and nothing imports it: the import
        ("import sys", False, False),  # the module imports it already: redundant
        ("import os.path", False, False),  # binds os, imported already
        ("import re", True, False),  # nothing reads re (a docstring's words are not code)
        ("import shutil as sh", True, True),  # a function's own import binds only there
        ("json = None", True, True),  # no import: no veto of this kind
    ],
)
def test_an_import_that_adds_nothing_is_never_shown_and_one_nothing_reads_never_unasked(
    line: str, asked: bool, unasked: bool
) -> None:
    """drafts/imports.adds_nothing, read by the decision (decide.vetoed): on the standard
    library's calibration holes, 13 of the 15 import drafts it takes away were wrong."""
    seen = Seen.whole(MODULE, AT, "python")
    found = [Draft(line, "workspace", 9.0)]
    for automatic, shown in ((False, asked), (True, unasked)):
        chosen = decide([], found, seen, Policy(automatic, False, gate=0.0))
        assert [c.text for c in chosen] == ([line] if shown else []), (line, automatic)
    if line.startswith("import "):  # typed on the cursor's line: the whole line is read
        typed = MODULE[:AT] + "import " + MODULE[AT:]
        rest = Draft(line.removeprefix("import "), "workspace", 9.0)
        chosen = decide([], [rest], Seen.whole(typed, AT + 7, "python"), Policy(False, False))
        assert bool(chosen) is asked, line
    # a body of several lines is no one-line import, whatever its first line
    body = Draft("import sys\nimport json", "workspace", 9.0)
    assert vetoed([body], seen, True) == frozenset()
    assert vetoed([Draft("import sys", "workspace", 9.0)], seen, False) == {"import sys"}
    # a __future__ import binds nothing the code reads, and is never idle
    module = imports_and_uses(MODULE.split("\n"), top=True)
    assert not adds_nothing("from __future__ import annotations", *module, asked=False)


def test_an_automatic_fill_keeps_to_one_line_except_on_a_body() -> None:
    trusting = Policy(automatic=True, trust_model=True)
    fill = "result = rows\n    result.sort()"
    line = decide([fill], [], Seen.whole(HOLE, CURSOR, "python", "statement"), trusting)
    assert [c.text for c in line] == ["result = rows"]
    body = decide([fill], [], Seen.whole(HOLE, CURSOR, "python", "block_body"), trusting)
    assert [c.text for c in body] == [fill]


def test_what_is_typed_is_read_from_the_document() -> None:
    text = "def f():\n    retu"
    assert Seen.whole(text, len(text), "python").typed == "retu"
    assert Seen.whole("x", 0, "python").typed == ""


def test_trust() -> None:
    assert not trusted("builtin")
    assert trusted("builtin", remote=True)
    assert trusted("org/model")
    assert trusted("org/model", setting=False) is False
    assert trusted("builtin", setting=True)
