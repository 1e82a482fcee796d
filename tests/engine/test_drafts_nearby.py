"""Drafting reads a document within NEAR_ROWS rows of the cursor (infill_engine/drafts/nearby.py):
the rows and offsets kept, a long document drafted from the rows near the cursor only and
named by its own line numbers, and every step of a request (the document's drafts and the
workspace's) reading no more than those rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infill_engine import drafts
from infill_engine.drafts import Cursor, gather, nearby
from infill_engine.drafts.nearby import NEAR_ROWS, row_start
from infill_engine.workspace.index import WorkspaceIndex


def rows(n: int) -> str:
    return "".join(f"row{i}\n" for i in range(n))


@pytest.mark.parametrize("trailing", ["\n", ""])
def test_the_rows_within_reach_of_the_cursors_are_kept_whole(trailing: str) -> None:
    text = rows(20)[:-1] + trailing
    lines = text.split("\n")  # with a trailing newline, an empty last row
    for row in range(20):
        for col in (0, 2, len(f"row{row}")):  # the row's start, its middle, its end
            offset = sum(len(x) + 1 for x in lines[:row]) + col
            w = nearby(text, offset, rows=3)
            assert w.row == max(0, row - 3)
            assert w.text.split("\n") == lines[w.row : row + 4]
            assert w.text[w.offset - col : w.offset] == text[offset - col : offset]
            assert w.text[w.offset :] == text[offset : offset + len(w.text) - w.offset]


def test_a_row_start_is_found_rows_up_and_stops_at_the_first() -> None:
    text = rows(10)
    at = text.index("row6") + 2  # inside row 6
    assert row_start(text, at) == text.index("row6")
    assert row_start(text, at, 2) == text.index("row4")
    assert row_start(text, at, 6) == 0
    assert row_start(text, at, 40) == 0
    assert row_start(text, text.index("row6")) == text.index("row6")  # a row's own start


def test_a_short_document_is_read_whole() -> None:
    text = rows(2 * 3 + 1)
    w = nearby(text, text.index("row3"), rows=3)
    assert (w.text, w.offset, w.row) == (text[:-1], text.index("row3"), 0)
    assert nearby("", 0) == drafts.Nearby("", 0, 0)
    small = rows(50)
    assert nearby(small, 7) == drafts.Nearby(small, 7, 0)


# A function whose second line is missing, far below its twin and near another.
FUNC = "def load(db):\n    rows = db.query('users')\n    return rows\n\n\n"
FILLER = "".join(f"value_{i} = {i}\n" for i in range(NEAR_ROWS + 500))


def test_a_long_document_is_drafted_from_the_rows_near_the_cursor_and_named_by_its_own_lines() -> (
    None
):
    hole = "def load(db):\n    \n    return rows\n"
    near = FILLER + FUNC + "x = 1\n" + hole
    found = gather(near, len(near) - len("\n    return rows\n"))
    twin_row = FILLER.count("\n") + 1  # the twin's line `rows = ...`, 0-based
    assert found and found[0].text == "rows = db.query('users')"
    assert found[0].where == f"line {twin_row + 1}"  # the document's line, not the piece's
    far = FUNC + FILLER + hole  # the twin more than NEAR_ROWS rows above
    assert "rows = db.query('users')" not in [
        d.text for d in gather(far, len(far) - len("\n    return rows\n"))
    ]


def test_no_step_of_a_request_reads_more_than_the_nearby(monkeypatch: Any, tmp_path: Path) -> None:
    text = FILLER * 4 + FUNC + "def load(db):\n    \n    return rows\n" + FILLER * 4
    offset = text.index("    \n    return rows")
    read: list[int] = []
    at = Cursor.at.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Cursor], text: str, offset: int, python: bool = True) -> Cursor:
        read.append(text.count("\n"))
        return at(cls, text, offset, python)

    monkeypatch.setattr(Cursor, "at", classmethod(counted))
    gather(text, offset)
    (tmp_path / "other.py").write_text(FUNC)
    index = WorkspaceIndex()
    assert index.build([tmp_path]) == 1
    index.drafts((tmp_path / "big.py").as_uri(), text, offset)
    assert len(read) == 2 and max(read) <= 2 * NEAR_ROWS
    assert text.count("\n") > 8 * NEAR_ROWS
