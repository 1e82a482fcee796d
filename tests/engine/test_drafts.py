"""Drafts from the code itself (infill_engine/drafts/): the line finder's candidates, the merge,
and the choice between drafts and the model's fills with the gate."""

from __future__ import annotations

import math
from dataclasses import replace

from infill_engine.drafts import (
    GATE,
    GATE_MODEL,
    Cursor,
    Draft,
    LineIndex,
    candidates,
    gather,
    merge,
)
from infill_engine.drafts.imports import is_python
from infill_engine.drafts.postings import cursor_keys, file_keys
from infill_engine.drafts.rank import FLOOR, choose
from infill_engine.drafts.weights import score

# Two functions with the same shape; the hole is the second's middle line.
DOC = (
    "def load_users(db):\n"
    "    rows = db.query('users')\n"
    "    result = [dict(r) for r in rows]\n"
    "    return result\n"
    "\n"
    "def load_groups(db):\n"
    "    rows = db.query('groups')\n"
    "    \n"
    "    return result\n"
)
CURSOR = DOC.index("    \n    return result\n") + 4


def test_a_line_whose_neighbours_match_the_cursors_comes_first() -> None:
    found = gather(DOC, CURSOR)
    assert found[0].text == "result = [dict(r) for r in rows]"
    assert found[0].source == "document" and found[0].where == "line 3"
    assert "return result" not in [d.text for d in found[:1]]  # the line below: the suffix has it


def test_the_cursors_own_line_is_never_a_candidate() -> None:
    text = "x = compute(a)\ny = other(b)\nx = compute(a)\n"
    offset = text.rindex("x = compute(a)") + len("x = com")
    # the cursor's line holds "x = compute(a)" too; only row 1 may be drafted, and it is cut
    # to what follows the typed part, the rest of the cursor's line left out
    cur = Cursor.at(text, offset)
    assert cur.typed == "x = com" and cur.rest == "pute(a)"
    index = LineIndex.build("", "document", text, skip=(2, 3))
    assert index.by_text["x = compute(a)"] == [0]
    assert candidates(Cursor.at(text, offset), [index]) == []  # nothing between typed and rest


def test_what_is_typed_filters_and_is_left_out_of_the_draft() -> None:
    text = DOC.replace("    \n    return result", "    result = [di\n    return result")
    offset = text.index("result = [di\n") + len("result = [di")
    found = gather(text, offset)
    assert found and found[0].text == "ct(r) for r in rows]"
    assert all(not d.text.startswith("result") for d in found)


def test_other_files_chunks_are_drafted_from_with_their_source() -> None:
    doc = "def load_groups(db):\n    rows = db.query('groups')\n    \n    return result\n"
    other = DOC.split("\n\n")[0]
    found = gather(doc, doc.index("    \n") + 4, extra=[("users.py", other)])
    ours = [d for d in found if d.text == "result = [dict(r) for r in rows]"]
    assert ours and ours[0].source == "extra" and ours[0].where == "users.py:3"
    alone = gather(doc, doc.index("    \n") + 4)
    assert "result = [dict(r) for r in rows]" not in [d.text for d in alone]


def test_merge_keeps_each_text_once_at_its_best_score_with_all_its_votes() -> None:
    a = [Draft("x = 1", "document", 1.0, votes=2), Draft("y = 2", "document", 0.5)]
    b = [Draft("x = 1", "workspace", 2.0, votes=3)]
    out = merge(a, b)
    assert [(d.text, d.source, d.score, d.votes) for d in out] == [
        ("x = 1", "workspace", 2.0, 5),
        ("y = 2", "document", 0.5, 1),
    ]
    assert merge(a, b, limit=1) == [Draft("x = 1", "workspace", 2.0, votes=5)]


# A draft whose occurrence has the cursor's lines above and below, alone and found three times;
# and one that only shares a few words, beside a close second (both over the floor, so shown
# when asked for). The first's score is what the shipped weights give its features.
NEIGHBOURS = (1, 1, 1, 0.6, 1, math.log(3), 1, 0, 0, 0, 1)
SURE = Draft("a()", "workspace", score(NEIGHBOURS), "", NEIGHBOURS, 3)
UNSURE = [Draft("b()", "document", FLOOR + 1.0, "", (0, 0, 0, 0.2, 1, 0, 0.5, 1, 0, 0, 1)),
          Draft("c()", "document", FLOOR + 0.9)]  # fmt: skip


def test_the_gate_trusts_a_lone_draft_with_the_same_neighbours_not_a_close_call() -> None:
    assert GATE_MODEL.confidence([SURE], "") >= GATE > GATE_MODEL.confidence(UNSURE, "")
    # a close second makes the best less sure; so does having fewer votes
    assert GATE_MODEL.confidence([SURE, replace(SURE, text="z()", score=SURE.score - 0.1)], "") < (
        GATE_MODEL.confidence([SURE], "")
    )
    assert GATE_MODEL.confidence([replace(SURE, votes=1)], "") < GATE_MODEL.confidence([SURE], "")
    # a client's draft without its features is judged on the rest, the features counting as
    # average; no drafts, no confidence
    assert 0 < GATE_MODEL.confidence([replace(SURE, features=())], "") < 1
    assert GATE_MODEL.confidence([], "") == 0.0


def test_automatic_triggers_show_only_a_draft_the_gate_passes_unless_the_model_is_trusted() -> None:
    picked = choose(["model()"], [SURE, *UNSURE], automatic=True, gate=GATE, trust_model=False)
    assert [(c.text, c.source) for c in picked] == [("a()", "workspace")]
    assert choose(["model()"], UNSURE, automatic=True, gate=GATE, trust_model=False) == []
    trusted = choose(["model()"], UNSURE, automatic=True, gate=GATE, trust_model=True)
    assert [c.text for c in trusted] == ["model()"]
    # the user's gate: 0 shows the best draft whenever there is one, 1 never
    assert [c.text for c in choose([], UNSURE, True, 0.0, False)] == ["b()"]
    assert choose([], [SURE], True, 1.0, False) == []


def test_a_draft_a_trusted_model_agrees_with_goes_first() -> None:
    picked = choose(["c()"], UNSURE, automatic=True, gate=GATE, trust_model=True)
    assert [(c.text, c.source) for c in picked] == [("c()", "document")]
    # an untrusted model's agreement lifts nothing over the gate
    assert choose(["c()"], UNSURE, automatic=True, gate=GATE, trust_model=False) == []


def test_invoked_requests_show_the_best_guess_in_order() -> None:
    untrusted = choose(["m()"], [SURE, *UNSURE], automatic=False, gate=GATE, trust_model=False)
    assert [c.text for c in untrusted] == ["a()", "b()", "c()", "m()"]
    trusted = choose(["m()"], [SURE, *UNSURE], automatic=False, gate=GATE, trust_model=True)
    assert [c.text for c in trusted] == ["a()", "m()", "b()", "c()"]
    unsure = choose(["m()"], UNSURE, automatic=False, gate=GATE, trust_model=True, below_gate=1)
    assert [c.text for c in unsure] == ["m()", "b()"]


def test_the_words_before_the_cursor_are_looked_up_inside_other_lines() -> None:
    # prompt-lookup drafting: `self._cache.get(` stands inside another line, not at its start
    text = (
        "class Store:\n"
        "    def size(self, key):\n"
        "        return len(self._cache.get(key, ()))\n"
        "\n"
        "    def first(self, key):\n"
        "        value = self._cache.get(\n"
    )
    found = gather(text, len(text) - 1)
    assert any(d.text == "key, ()))" and d.source == "document" for d in found)
    assert all(not d.text.startswith("value") for d in found)


def test_a_block_opener_is_no_draft_where_its_block_would_stay_empty() -> None:
    text = (
        "def load_users(db):\n"
        "    rows = db.query('users')\n"
        "    return [dict(row) for row in rows]\n"
        "\n\n"
        "def load_groups(db):\n"
        "    rows = db.query('groups')\n"
        "    \n"
    )
    found = gather(text, len(text) - 1)
    assert found[0].text == "return [dict(row) for row in rows]"
    assert all(not d.text.endswith(":") for d in found)
    # under an opener's indentation, the next line deeper, an opener may stand
    cur = Cursor.at("if a:\n    \n        go()\n", len("if a:\n    "))
    assert cur.takes("for x in xs:") and not Cursor.at("if a:\n    \n", 10).takes("if b:")


# The same opener twice; the second's body is what is missing.
BODIES = (
    "def first(items):\n"
    "    for item in items:\n"
    "        if item.ready:\n"
    "            item.send()\n"
    "            log(item)\n"
    "    return items\n"
    "\n"
    "def second(items):\n"
    "    for item in items:\n"
    "        \n"
    "    return items\n"
)
BODY_CURSOR = BODIES.index("        \n    return items\n", BODIES.index("second")) + 8


def test_an_empty_body_is_drafted_whole_from_the_same_opener_elsewhere() -> None:
    found = gather(BODIES, BODY_CURSOR)
    body = "if item.ready:\n            item.send()\n            log(item)"
    assert found[0].text == body and found[0].where == "line 3"
    # the opener above, the line below the body: both equal
    assert GATE_MODEL.confidence(found, "") >= GATE
    # not where the body is there already, nor where something is typed on the line
    filled = BODIES.replace("        \n    return", "        pass\n    return")
    assert not any("\n" in d.text for d in gather(filled, filled.index("pass")))
    typed = BODIES[:BODY_CURSOR] + "if" + BODIES[BODY_CURSOR:]
    assert not any("\n" in d.text for d in gather(typed, BODY_CURSOR + 2))


def test_a_body_draft_is_shown_when_asked_for_never_unasked() -> None:
    body = replace(SURE, text="if x:\n        y()")
    assert GATE_MODEL.confidence([body], "") >= GATE
    assert choose([], [body], automatic=True, gate=GATE, trust_model=False) == []
    asked = choose(["m()"], [body], automatic=False, gate=GATE, trust_model=False)
    assert [c.text for c in asked] == [body.text, "m()"]


def test_a_body_draft_is_finished_with_its_lines() -> None:
    from infill_engine.decide import Seen, finished

    found = gather(BODIES, BODY_CURSOR)[:1]
    done = finished(found, Seen.whole(BODIES, BODY_CURSOR, "python"))
    assert [d.text for d in done] == [found[0].text]  # three lines, valid where it stands


def test_imported_names_are_those_an_import_binds() -> None:
    from infill_engine.drafts.imports import imported_names

    assert imported_names("import a.b") == {"a"}
    assert imported_names("import a.b as c, d") == {"c", "d"}
    assert imported_names("from m import x, y as z") == {"x", "z"}
    assert imported_names("from ..m import (x, y)") == {"x", "y"}
    for other in ("from m import *", "from m import (", "x = 1", "important = 1"):
        assert imported_names(other) == frozenset()


# A module that uses `warnings` and `reduce` but imports neither; the cursor is in its imports.
# It names json and chain too, but not as code: in its docstring, a comment, a string, an import.
MODULE = (
    '"""Runs. >>> json.dumps(run([1]))"""\n'
    "import os\n"
    "\n"
    "import sys\n"
    "from chain import link\n"
    "\n"
    "\n"
    "def run(xs):  # json\n"
    "    warnings.warn(os.sep + sys.platform + 'json')\n"
    "    return reduce(max, xs)\n"
)
IMPORT_CURSOR = MODULE.index("\n\nimport sys") + 1
ELSEWHERE = (
    "import json\n"  # not used by the module
    "import os\n"  # imported there already
    "import warnings\n"
    "from functools import reduce\n"
    "from itertools import chain\n"
    "\n"
    "x = json.dumps(list(chain(os.sep, warnings.filters, [reduce])))\n"
)


def test_an_import_of_a_name_the_document_uses_and_lacks_is_drafted_from_elsewhere() -> None:
    cur = Cursor.at(MODULE, IMPORT_CURSOR)
    assert cur.in_imports and cur.imported == {"os", "sys", "link"}
    assert {"warnings", "reduce"} <= cur.used and not {"json", "chain"} & cur.used
    other = LineIndex.build("other.py", "workspace", ELSEWHERE)
    texts = [d.text for d in candidates(cur, [other])]
    # the two imports the module needs, and none of the others
    assert set(texts) & {"import warnings", "from functools import reduce"} == {
        "import warnings",
        "from functools import reduce",
    }
    assert not set(texts) & {"import json", "import os", "from itertools import chain"}
    # what is typed narrows them; away from the imports, none are drafted this way
    typed = MODULE[:IMPORT_CURSOR] + "from " + MODULE[IMPORT_CURSOR:]
    at = Cursor.at(typed, IMPORT_CURSOR + 5)
    assert [d.text for d in candidates(at, [other])][:1] == ["functools import reduce"]
    body = MODULE.index("    return") + 4
    assert not Cursor.at(MODULE, body).in_imports
    assert "import warnings" not in [d.text for d in candidates(Cursor.at(MODULE, body), [other])]


def test_in_a_block_of_imports_the_import_of_a_name_the_code_lacks_goes_first() -> None:
    """Among the drafts in a block of imports, an import that binds what the code reads and
    nothing imports goes before surer ones that do not (on the standard library's calibration
    holes in import blocks, the first draft was then right 54 times of 200, not 27)."""
    carried = [
        Draft("import json", "workspace", 9.0),  # surer, but the code reads no json
        Draft("from itertools import chain", "workspace", 8.0),
        Draft("from functools import reduce", "workspace", 3.0),  # the one missing
    ]
    texts = [d.text for d in gather(MODULE, IMPORT_CURSOR, carried=carried)]
    assert texts[0] == "from functools import reduce"
    assert texts.index("import json") < texts.index("from itertools import chain")  # as scored
    # in another language (no block of imports), the order is the finder's
    other = [d.text for d in gather(MODULE, IMPORT_CURSOR, carried=carried, python=False)]
    assert other.index("import json") < other.index("from functools import reduce")


def test_only_python_text_is_read_for_imports() -> None:
    """Python's import syntax is read only in Python: a document, a file or a chunk of another
    language has no block of imports at its cursor, no imports indexed, and no import keys."""
    assert is_python("a/b.py") and is_python("file:///x.pyi") and is_python(language_id="python")
    assert not is_python("a/b.js") and not is_python("", "typescript")
    assert not Cursor.at(MODULE, IMPORT_CURSOR, python=False).in_imports
    assert LineIndex.build("other.py", "workspace", ELSEWHERE).imports
    assert not LineIndex.build("other.go", "workspace", ELSEWHERE).imports  # by its path
    assert not LineIndex.build("other.py", "workspace", ELSEWHERE, python=False).imports
    # a file's keys: the names its imports bind only for Python (postings.py)
    with_imports, without = file_keys(ELSEWHERE), file_keys(ELSEWHERE, python=False)
    import_keys = set(with_imports.tolist()) - set(without.tolist())
    assert set(without.tolist()) < set(with_imports.tolist())
    keys, _ = cursor_keys(Cursor.at(MODULE, IMPORT_CURSOR))  # warnings and reduce: asked for
    assert set(keys) & import_keys
    elsewhere, _ = cursor_keys(Cursor.at(MODULE, IMPORT_CURSOR, python=False))
    assert not set(elsewhere) & import_keys
