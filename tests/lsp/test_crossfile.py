"""The store of other files' chunks (lsp_server/workspace/crossfile.py), in memory: its bounds, the
near-duplicate rule, the choice by relevance, and what is never chosen."""

from __future__ import annotations

from lsp_server.workspace.crossfile import (
    ChunkStore,
    display_name,
    edited_line,
    identifiers,
    window,
)

ROOT = "file:///ws"
HELPERS = "def frobnicate(widgets):\n    return sorted(widgets)\n"
SHAPES = "class Polygon:\n    def area(self):\n        return 0\n"
CURSOR_DOC = "from helpers import frobnicate\n\nitems = frobnicate("


def test_identifiers_leave_out_syntax_and_short_names() -> None:
    assert identifiers("def frobnicate(xs): return self.widgets") == {"frobnicate", "widgets"}


def test_the_store_holds_at_most_max_chunks_of_at_most_chunk_lines() -> None:
    store = ChunkStore(max_chunks=4, chunk_lines=8, roots=(ROOT,))
    for i in range(10):
        store.add(f"{ROOT}/m{i}.py", "".join(f"name_{i}_{j} = {j}\n" for j in range(20)))
    assert len(store.chunks) == 4
    assert [c.name for c in store.chunks] == ["m6.py", "m7.py", "m8.py", "m9.py"]  # oldest left
    assert all(c.text.count("\n") == 8 for c in store.chunks)
    assert not store.add(f"{ROOT}/blank.py", "\n  \n")  # nothing to store


def test_a_near_duplicate_replaces_and_a_different_chunk_does_not() -> None:
    store = ChunkStore(roots=(ROOT,))
    body = "".join(f"line_{j} = {j}\n" for j in range(40))
    store.add(f"{ROOT}/a.py", body, source="edit")
    store.add(f"{ROOT}/b.py", SHAPES)
    store.add(f"{ROOT}/a.py", body + "line_40 = 40\n", source="edit")  # 40 of 41 lines alike
    assert [c.name for c in store.chunks] == ["b.py", "a.py"]  # replaced, and now the newest
    assert "line_40" in store.chunks[-1].text
    half = "".join(f"line_{j} = {j}\n" for j in range(20))  # Jaccard 20/41: a chunk of its own
    store.add(f"{ROOT}/a.py", half)
    assert len(store.chunks) == 3


def test_the_choice_is_by_shared_names_and_the_best_comes_last() -> None:
    store = ChunkStore(roots=(ROOT,))
    store.add(f"{ROOT}/helpers.py", HELPERS)
    store.add(f"{ROOT}/shapes.py", SHAPES)
    store.add(f"{ROOT}/both.py", "from helpers import frobnicate\nitems = []\n")
    choice = store.choose(f"{ROOT}/main.py", CURSOR_DOC, len(CURSOR_DOC), 512)
    names = [c.name for c in choice.chunks]
    assert "shapes.py" not in names  # shares no name with the cursor's lines
    assert names[-1] in ("helpers.py", "both.py") and set(names) == {"helpers.py", "both.py"}
    assert "frobnicate" in choice.shared and choice.ms >= 0
    assert choice.extra[-1][0] == names[-1]
    # a name few chunks hold weighs more than one many hold
    many = ChunkStore(roots=(ROOT,))
    for i in range(4):
        many.add(f"{ROOT}/common{i}.py", f"import logging\nlogging_level_{i} = 1\n")
    many.add(f"{ROOT}/rare.py", "def frobnicate(widgets):\n    pass\n")
    many.add(f"{ROOT}/rare2.py", "import logging\n")
    doc = "import logging\nfrobnicate("
    assert many.choose(f"{ROOT}/main.py", doc, len(doc), 512).chunks[-1].name == "rare.py"


def test_never_the_current_document_nor_another_workspace_folder() -> None:
    store = ChunkStore(roots=(ROOT, "file:///other"))
    store.add(f"{ROOT}/main.py", HELPERS)  # the document being completed
    store.add("file:///other/helpers.py", HELPERS + "# elsewhere\n")  # another folder
    assert store.choose(f"{ROOT}/main.py", CURSOR_DOC, len(CURSOR_DOC), 512).chunks == ()
    store.pushed(HELPERS + "# yanked\n")  # pushed without a document: any document may use it
    chosen = store.choose(f"{ROOT}/main.py", CURSOR_DOC, len(CURSOR_DOC), 512).chunks
    assert [c.source for c in chosen] == ["push"]


def test_the_budget_bounds_what_is_sent() -> None:
    store = ChunkStore(roots=(ROOT,))
    for i in range(6):
        store.add(f"{ROOT}/m{i}.py", f"def frobnicate_{i}():\n    frobnicate = {i}\n" * 8)
    doc = "frobnicate"
    assert len(store.choose(f"{ROOT}/x.py", doc, len(doc), 4096).chunks) == 6
    few = store.choose(f"{ROOT}/x.py", doc, len(doc), 100).chunks  # ~400 characters
    assert 1 <= len(few) < 6 and sum(len(c.text) for c in few[1:]) < 400
    assert store.choose(f"{ROOT}/x.py", doc, len(doc), 0).chunks == ()


def test_edits_store_the_lines_around_them_and_a_save_the_last_edit() -> None:
    text = "".join(f"row_{j} = {j}\n" for j in range(200))
    store = ChunkStore(roots=(ROOT,))
    store.edited(f"{ROOT}/big.py", text, 150)
    (c,) = store.chunks
    assert c.start_line == 118 and "row_150 =" in c.text and c.text.count("\n") == 64
    store.edited(f"{ROOT}/big.py", text.replace("row_151 = 151", "row_151 = 0"), 151)
    assert len(store.chunks) == 1  # the same place, typed on: one chunk
    store.saved(f"{ROOT}/big.py", text)
    assert store.chunks[-1].source == "save" and "row_151" in store.chunks[-1].text
    assert window("a\nb\n", 5, 64) == (0, "a\nb\n")


def test_names_and_edited_lines() -> None:
    assert display_name(f"{ROOT}/pkg/a%20b.py", (ROOT,)) == "pkg/a b.py"
    assert display_name("file:///elsewhere/c.py", (ROOT,)) == "c.py"
    rng = {"start": {"line": 7, "character": 0}, "end": {"line": 7, "character": 1}}
    assert edited_line({"contentChanges": [{"range": rng, "text": "x"}]}) == 7
    assert edited_line({"contentChanges": [{"text": "whole"}]}) is None
    assert edited_line("junk") is None
