"""What inline completion reads of the edit history (edits/renames.py): a name renamed at its
binding is the name to use in its scope, and in no other; and `decide` writes it so in every
draft and fill."""

from __future__ import annotations

from typing import Any

import pytest
from test_next_structure import RENAMES, replaced

import grammars
from infill_engine.decide import Policy, Seen, decide
from infill_engine.drafts import Draft
from infill_engine.edits import History
from infill_engine.edits.renames import rename, renames


def _renamed(language: str, text: str, old: str, new: str, nth: int = 0) -> tuple[str, History]:
    """`text` with the `nth` occurrence of the name `old` replaced by `new`, as one edit."""
    h, at = History(), -1
    for _ in range(nth + 1):
        at = text.index(old, at + 1)
    return replaced(text, at, at + len(old), new, h), h


def _tree(language: str, text: str) -> Any:
    return grammars.parser(language).parse(text.encode())


@pytest.mark.parametrize("language", sorted(RENAMES))
def test_a_renamed_parameter_holds_in_its_function_and_nowhere_else(language: str) -> None:
    """`w` renamed `width` in area's signature: in area's body it is `width`; in g, whose own
    parameter is also `w`, nothing is renamed."""
    text, h = _renamed(language, RENAMES[language], "w", "width")
    tree = _tree(language, text)
    body = text.index("* h")
    assert renames(text, h.edits(), tree, body) == (("w", "width"),)
    assert renames(text, h.edits(), tree, len(text) - 3) == ()  # in g


def test_a_reference_changed_is_not_a_rename() -> None:
    """Only an edit at the binding renames: `return w * h` made `return v * h` changes what is
    read, whatever `v` is."""
    text, h = _renamed("python", RENAMES["python"], "w", "v", nth=1)
    assert renames(text, h.edits(), _tree("python", text), text.index("* h")) == ()


def test_a_function_renamed_holds_in_the_whole_document_and_renames_chain() -> None:
    text = "def fetch_rows(db):\n    return db.rows()\n\n\ndef main():\n    pass\n"
    text, h = _renamed("python", text, "fetch_rows", "load_rows")
    at = text.index("pass")
    assert renames(text, h.edits(), _tree("python", text), at) == (("fetch_rows", "load_rows"),)
    start = text.index("load_rows")
    text = replaced(text, start, start + len("load_rows"), "read_rows", h)
    assert renames(text, h.edits(), _tree("python", text), at) == (("fetch_rows", "read_rows"),)
    start = text.index("read_rows")
    text = replaced(text, start, start + len("read_rows"), "fetch_rows", h)  # and back
    assert renames(text, h.edits(), _tree("python", text), at) == ()


def test_a_name_bound_again_in_the_scope_is_not_renamed() -> None:
    """Two functions each define `helper`; one is renamed: the other still binds the old name,
    so the document says nothing of which is meant."""
    text = "def helper():\n    pass\n\n\ndef helper():\n    return 1\n\n\nx = 1\n"
    text, h = _renamed("python", text, "helper", "assist")
    assert renames(text, h.edits(), _tree("python", text), len(text) - 1) == ()


def test_a_history_that_does_not_describe_the_text_says_nothing() -> None:
    text, h = _renamed("python", RENAMES["python"], "w", "width")
    other = text.replace("width", "wide")  # changed behind the history's back
    assert renames(other, h.edits(), _tree("python", other), other.index("* h")) == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = get(uid) + 1", "x = get(user) + 1"),
        ("self.uid = uid", "self.uid = user"),  # a member is another name
        ("p->uid + ns::uid + a?.uid", "p->uid + ns::uid + a?.uid"),
        ("log('uid', \"uid\", uid)", "log('uid', \"uid\", user)"),  # strings stay
        ("uids = uid_of(uid)", "uids = uid_of(user)"),  # whole names only
        ("f(uid)  # uid here\n", "f(user)  # uid here\n"),  # comments stay
        ("f(uid) // uid here", "f(user) // uid here"),
        ("#include <uid.h>\n#define X(uid) uid\n", "#include <uid.h>\n#define X(user) user\n"),
        ("/* the\n * uid\n */ uid", "/* the\n * uid\n */ user"),
        ("*p = uid;", "*p = user;"),
        ("#[derive(uid)]", "#[derive(user)]"),
    ],
)
def test_rename_writes_names_only(text: str, expected: str) -> None:
    assert rename(text, (("uid", "user"),)) == expected


def test_decide_writes_the_new_name_in_drafts_and_fills() -> None:
    """A draft copied from where the rename has not reached reads the old name; shown, it
    reads the new one, once even where a draft already had it."""
    doc = "def load(conn):\n    rows = conn.query()\n    \n    return rows\n"
    at = doc.index("    \n") + 4
    drafts = [Draft("db.close()", "workspace", 3.0), Draft("conn.close()", "document", 2.0)]
    policy = Policy(automatic=False, trust_model=False)
    plain = decide(["db.flush()"], drafts, Seen.whole(doc, at, "python"), policy)
    assert "db.close()" not in [c.text for c in plain]  # db is unbound here (decide.unbound)
    seen = Seen.whole(doc, at, "python", renamed=(("db", "conn"),))
    texts = [c.text for c in decide(["db.flush()"], drafts, seen, policy)]
    assert texts[0] == "conn.close()" and texts.count("conn.close()") == 1
    assert "conn.flush()" in texts and not any("db" in t for t in texts)
