"""lab/eval_retrieved.py on a small repository written here: the snippets are the code around the
best drafts' occurrences (the best nearest the prefix), the control's come from the same files,
and every hole is filled the three ways with the builtin model."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dllm_lab.eval_retrieved import evaluate, snippets
from infill_engine import load
from infill_engine.drafts import Draft
from infill_engine.drafts.lines import LineIndex

BLOCK = (
    "def load_{0}(db, key):\n"
    "    rows = db.query('{0}', key)\n"
    "    result = [dict(r) for r in rows if r]\n"
    "    return result\n\n\n"
)


def test_snippets_are_the_code_around_the_drafts_occurrences(tmp_path: Path) -> None:
    text = "".join(BLOCK.format(n) for n in ("a", "b", "c", "d"))
    path = (tmp_path / "users.py").resolve()
    files = {path: LineIndex.build(str(path), "workspace", text)}
    document = LineIndex.build("", "document", "x = 1\ny = 2\nz = 3\n")
    found = [
        Draft("result = [dict(r) for r in rows if r]", "workspace", 5.0, f"{path}:9"),
        Draft("y = 2", "document", 1.0, "line 2"),
        Draft("nowhere()", "workspace", 0.5, "gone.py:3"),  # a file not indexed: left out
    ]
    near, far = snippets(found, files, document, 3, 1, random.Random(0))
    assert near == [("this file", "x = 1\ny = 2\nz = 3"),
                    (str(path), "    rows = db.query('b', key)\n"
                                "    result = [dict(r) for r in rows if r]\n"
                                "    return result")]  # fmt: skip
    assert [name for name, _ in far] == [name for name, _ in near]
    assert all(len(chunk.split("\n")) <= 3 for _, chunk in far)
    assert snippets(found, files, document, 1, 1, random.Random(0))[0] == near[1:]


@pytest.mark.slow
def test_evaluate_fills_each_hole_three_ways(tmp_path: Path) -> None:
    for name in ("users", "groups"):
        (tmp_path / f"{name}.py").write_text("".join(BLOCK.format(f"{name}_{i}") for i in "ab"))
    engine = load("builtin", device="cpu")
    try:
        r = evaluate(engine, tmp_path, 4, seed=1, top=2, lines=4)
    finally:
        engine.close()
    assert r["holes"] == 4 and 0 < r["with_snippets"] <= 4
    for way in ("none", "retrieved", "random", "draft"):
        assert 0.0 <= r[f"exact_{way}"] <= 1.0
    assert r["exact_draft"] > 0  # each line stands in the other file, around the same lines
