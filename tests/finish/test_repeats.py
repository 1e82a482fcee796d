"""Nothing shown repeats itself (repeat.repeats), in every language, plain text included: the
stutter rule on texts, the finish on a document of no grammar, and a fuzz of adversarial
candidates (repetitive fills, nested calls, repeated lines) through `decide` in every language
with a grammar and none."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infill_engine.decide import Policy, Seen, decide
from infill_engine.drafts import Draft
from infill_engine.finish import Around, finish
from infill_engine.repeat import (
    STUTTER_COPIES,
    cut_repeats,
    find_loop,
    find_stutter,
    repeats,
)


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("wo.g.g.g.g.g.g.g.g.g..", "wo"),  # the plain-text fill users saw
        ("x = a" + ".b" * STUTTER_COPIES, "x = a"),
        ("f(" + "x," * 8 + ")", "f("),
        ("return os" + ".path" * 12, "return os"),  # a loop, as before
        ("    pass\n" * 6, "    pass\n"),
    ],
)
def test_a_stutter_is_cut_where_it_starts(text: str, cut: str) -> None:
    assert cut_repeats(text) == cut
    assert repeats(cut_repeats(text)) is None


@pytest.mark.parametrize(
    "text",
    [
        "mask = 0xFFFFFFFFFFFFFFFF",  # one character over: no mark, and no unit of 2
        "# -=-=-=-=-=-=-=-=-=-=-=",  # a ruler: no letter
        "x = [0, 0, 0, 0, 0, 0, 0, 0]",  # data: no letter
        "a.b.a.b.a",  # too few copies
        "print(a.b.c.d.e.f.g.h)",
        "ha ha ha ha ha ha",  # words and spaces: no mark
        "abababababababab",  # no mark (and a loop only from 24 characters)
    ],
)
def test_text_that_is_no_stutter(text: str) -> None:
    assert find_stutter(text) is None
    assert repeats(text) is None and cut_repeats(text) == text


@pytest.mark.parametrize("language_id", ["plaintext", "txt", "", "markdown", "cobol"])
def test_plain_text_is_cut_too(language_id: str) -> None:
    """No grammar, no syntax check: the repetition cut still runs."""
    before, after = "Notes\n\nThe work ", "\n"
    shown = finish(
        "wo.g.g.g.g.g.g.g.g.g..", before, after, language_id, document=Around(before, after)
    )
    assert shown == "wo"
    assert finish("path." * 12, before, after, language_id) is None


# one short document per language, and the cursor's place in it (at "|")
DOCUMENTS = {
    "python": "import os\n\n\ndef load(path):\n    data = |\n    return data\n",
    "go": "package main\n\nfunc load(path string) string {\n\tdata := |\n\treturn data\n}\n",
    "typescript": "function load(path: string): string {\n  const data = |;\n  return data;\n}\n",
    "javascript": "function load(path) {\n  const data = |;\n  return data;\n}\n",
    "rust": "fn load(path: &str) -> String {\n    let data = |;\n    data\n}\n",
    "java": "class A {\n  String load(String p) {\n    String d = |;\n    return d;\n  }\n}\n",
    "c": "char *load(char *path) {\n  char *data = |;\n  return data;\n}\n",
    "cpp": "std::string load(std::string path) {\n  auto data = |;\n  return data;\n}\n",
    "plaintext": "Shopping list\n\n- milk\n- |\n- bread\n",
}

UNITS = ["a.", ".g", "foo(", "path.", "x, ", "os.path.", "g(", "[a]", "if x:", "ha "]
LINES = ["x = 1", "data = load(path)", "return data;", "}", "\tfoo();", "- eggs", "pass"]


@st.composite
def candidates(draw: st.DrawFn) -> str:
    """A text a model that has lost the thread writes: a unit over and over, nested calls,
    a line over and over, after a start that may be sound."""
    head = draw(st.sampled_from(["", "path", "load(", "data.", "x = ", "milk "]))
    kind = draw(st.sampled_from(["unit", "nested", "lines", "mixed"]))
    copies = draw(st.integers(min_value=2, max_value=40))
    if kind == "unit":
        body = draw(st.sampled_from(UNITS)) * copies
    elif kind == "nested":
        name = draw(st.sampled_from(["foo", "f", "load", "a.b"]))
        body = f"{name}(" * copies + ")" * draw(st.integers(0, copies))
    elif kind == "lines":
        indent = draw(st.sampled_from(["", "    ", "\t", "  "]))
        body = (draw(st.sampled_from(LINES)) + "\n" + indent) * copies
    else:
        body = "".join(draw(st.lists(st.sampled_from(UNITS + LINES), min_size=1, max_size=8)))
        body = body * copies
    return head + body + draw(st.sampled_from(["", "\n", ";", ")", "\n}\n"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    language_id=st.sampled_from(sorted(DOCUMENTS)),
    fills=st.lists(candidates(), min_size=1, max_size=3),
    drafted=st.lists(candidates(), max_size=3),
    automatic=st.booleans(),
)
def test_nothing_shown_repeats_itself(
    language_id: str, fills: list[str], drafted: list[str], automatic: bool
) -> None:
    doc = DOCUMENTS[language_id]
    offset = doc.index("|")
    text = doc[:offset] + doc[offset + 1 :]
    seen = Seen.whole(text, offset, language_id, kind="block_body")
    found = [Draft(d, "document", 5.0 - i) for i, d in enumerate(drafted) if d.strip()]
    policy = Policy(automatic=automatic, trust_model=True, gate=0.0)
    for choice in decide(fills, found, seen, policy):
        assert repeats(choice.text) is None, (language_id, choice.text)
        assert find_loop(choice.text) is None


def test_the_fuzz_reaches_what_users_saw() -> None:
    """The premise: the candidates the fuzz draws hold repeats that finish must cut."""
    seen = Seen.whole("- milk\n- \n", 9, "plaintext")
    raw = "wo" + ".g" * 9 + ".."
    assert repeats(raw) is not None
    shown = decide([raw], [], seen, Policy(automatic=False, trust_model=True))
    assert [c.text for c in shown] == ["wo"]
