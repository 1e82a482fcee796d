"""The files a lookup drafts from (infill_engine/drafts/postings.py): the keys pick the file that
holds the cursor's neighbours among many, changes after the build count, and a lookup in a
large workspace reads at most FILES files' lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infill_engine.drafts.lines import Cursor
from infill_engine.drafts.postings import FILES, MERGE, Postings, cursor_keys, file_keys
from infill_engine.workspace.index import MARGIN, PIECE_LINES, WorkspaceIndex

PATTERN = "def load_{0}(db):\n    rows = db.query('{0}')\n    result = [dict(r) for r in rows]\n"
HOLE = "def load_groups(db):\n    rows = db.query('groups')\n    \n    return result\n"
CURSOR = HOLE.index("    \n") + 4


def _filler(i: int) -> str:
    return "".join(f"def f{i}_{j}(x):\n    return x * {j} + {i}\n\n" for j in range(20))


def _keep(n: int) -> np.ndarray:
    return np.ones(n, dtype=bool)


def test_the_file_holding_the_neighbours_comes_first() -> None:
    texts = [_filler(i) for i in range(300)]
    texts[137] = PATTERN.format("users")
    postings = Postings.build((i, file_keys(t)) for i, t in enumerate(texts))
    keys, weights = cursor_keys(Cursor.at(HOLE, CURSOR))
    best = postings.best(keys, weights, _keep(len(texts)))
    assert best and best[0] == 137
    assert 136 not in best  # holds none of the keys
    keep = _keep(len(texts))
    keep[137] = False
    assert 137 not in postings.best(keys, weights, keep)


def test_updates_and_removals_count_before_and_after_a_merge() -> None:
    texts = [_filler(i) for i in range(40)]
    postings = Postings.build((i, file_keys(t)) for i, t in enumerate(texts))
    keys, weights = cursor_keys(Cursor.at(HOLE, CURSOR))
    assert postings.best(keys, weights, _keep(40)) == []
    postings.update(5, file_keys(PATTERN.format("users")))  # a save: kept apart
    assert postings.best(keys, weights, _keep(40))[0] == 5
    postings.update(5, None)  # deleted
    assert postings.best(keys, weights, _keep(40)) == []
    for i in range(MERGE):  # enough changes to merge them into the sorted array
        postings.update(i % 40, file_keys(texts[i % 40] + f"y = {i}\n"))
    postings.update(7, file_keys(PATTERN.format("roles")))
    assert postings.best(keys, weights, _keep(40))[0] == 7


def test_a_large_workspace_drafts_from_at_most_files_files(tmp_path: Path) -> None:
    for i in range(4 * FILES):
        (tmp_path / f"m{i}.py").write_text(_filler(i))
    (tmp_path / "users.py").write_text(PATTERN.format("users"))
    index = WorkspaceIndex()
    index.build([tmp_path])
    found = index.drafts((tmp_path / "groups.py").as_uri(), HOLE, CURSOR)
    assert found and found[0].text == "result = [dict(r) for r in rows]"
    assert found[0].where.endswith("users.py:3")
    # only the pieces the keys picked were read
    assert 0 < index.status()["cached"]["pieces"] <= FILES


def test_a_long_file_is_read_in_pieces_its_rows_counted_from_the_file(tmp_path: Path) -> None:
    """A line past the first piece of a 2,000-line file is found, under its row in the file;
    a lookup reads pieces, not whole files."""
    filler = "".join(f"value_{j} = compute({j})\n" for j in range(1500))
    (tmp_path / "long.py").write_text(filler + PATTERN.format("users") + filler[:10_000])
    for i in range(2 * FILES):
        (tmp_path / f"m{i}.py").write_text(_filler(i))
    index = WorkspaceIndex()
    index.build([tmp_path])
    found = index.drafts((tmp_path / "groups.py").as_uri(), HOLE, CURSOR)
    assert found and found[0].text == "result = [dict(r) for r in rows]"
    assert found[0].where.endswith("long.py:1503")
    cached = index.status()["cached"]  # pieces, not the whole 3,000-line file
    assert cached["lines"] <= cached["pieces"] * (PIECE_LINES + 2 * MARGIN)
    assert cached["lines"] < filler.count("\n")
