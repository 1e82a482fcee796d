"""The rename measurement (lab/eval_renames.py): after a parameter renamed at its binding, a
line still to come that reads the new name is a hole, and the drafts copied from where the old
name still stands are written with the new one."""

from __future__ import annotations

from dllm_lab.eval_renames import evaluate, holes
from dllm_lab.histories import Commit, Hunk

TEXT = (
    "def area(w, h):\n    rows = load(h)\n    print(w)\n    return rows\n\n\n"
    "def perimeter(w, h):\n    rows = load(h)\n    print(w)\n    return rows\n"
)
COMMIT = Commit(
    "o/r", "0" * 40, "shapes.py", "python", TEXT,
    (
        Hunk(0, "def area(w, h):\n", "def area(width, h):\n"),
        Hunk(2, "    print(w)\n", "    print(width)\n"),
    ),
)  # fmt: skip


def test_the_lines_still_to_come_that_read_the_new_name_are_the_holes() -> None:
    found = list(holes(COMMIT, "forward"))
    assert [(truth, pairs) for _, _, truth, pairs in found] == [("print(width)", (("w", "width"),))]
    text, cursor, _, _ = found[0]
    assert text.startswith("def area(width, h):\n    rows = load(h)\n    \n    return rows\n")
    assert cursor == text.index("\n    \n") + 5
    assert list(holes(COMMIT, "backward")) == []  # the binding renamed last: nothing to come


def test_the_renames_make_the_copied_line_right() -> None:
    t = evaluate([COMMIT], ("forward", "backward"))["python"]
    assert t["holes"] == 1
    assert t["invoked_renamed_exact"] == 1 > t["invoked_plain_exact"] == 0
    assert t["invoked_changed"] == 1
