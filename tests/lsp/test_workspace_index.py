"""The workspace index (infill_engine/workspace/index.py) on real folders: .gitignore rules (the
root's and nested ones), the size and count limits, updates on save and on watched-file
changes, and never a document's own copy on disk."""

from __future__ import annotations

from pathlib import Path

from infill_engine.workspace.index import WorkspaceIndex

PATTERN = "def load_{0}(db):\n    rows = db.query('{0}')\n    result = [dict(r) for r in rows]\n"
HOLE = "def load_groups(db):\n    rows = db.query('groups')\n    \n    return result\n"
CURSOR = HOLE.index("    \n") + 4


def _tree(root: Path) -> None:
    (root / "pkg" / "vendor").mkdir(parents=True)
    (root / "build").mkdir()
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("build/\n*.gen.py\n")
    (root / "pkg" / ".gitignore").write_text("vendor/\n")
    (root / "pkg" / "users.py").write_text(PATTERN.format("users"))
    (root / "pkg" / "made.gen.py").write_text(PATTERN.format("made"))
    (root / "pkg" / "vendor" / "lib.py").write_text(PATTERN.format("vendored"))
    (root / "build" / "out.py").write_text(PATTERN.format("built"))
    (root / ".git" / "hook.py").write_text(PATTERN.format("hidden"))
    (root / "pkg" / "big.py").write_text("x = 1\n" * 50_000)
    (root / "pkg" / "notes.txt").write_text(PATTERN.format("text"))


def _files(index: WorkspaceIndex) -> set[str]:
    return {Path(p).name for p in index.paths()}


def test_the_index_honours_gitignore_hidden_folders_and_the_size_limit(tmp_path: Path) -> None:
    _tree(tmp_path)
    index = WorkspaceIndex(max_file_bytes=64 * 1024)
    assert index.build([tmp_path]) == 1
    assert _files(index) == {"users.py"}
    status = index.status()
    assert (status["ready"], status["files"], status["lines"]) == (True, 1, 4)
    assert status["skipped_by"] == {"ignored": 1, "too_large": 1}  # made.gen.py, big.py


def test_the_file_count_is_bounded(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text(f"x{i} = {i}\n")
    index = WorkspaceIndex(max_files=3)
    assert index.build([tmp_path]) == 3 and index.skipped == {"over_budget": 2}
    assert not index.update(tmp_path / "m4.py")  # full: a new file stays out


def test_drafts_come_from_other_files_never_the_documents_own_disk_copy(tmp_path: Path) -> None:
    _tree(tmp_path)
    groups = tmp_path / "pkg" / "groups.py"
    groups.write_text(HOLE.replace("    \n", "    result = 'stale copy on disk'\n"))
    index = WorkspaceIndex()
    index.build([tmp_path])
    found = index.drafts(groups.as_uri(), HOLE, CURSOR)
    assert found[0].text == "result = [dict(r) for r in rows]"
    assert found[0].source == "workspace" and found[0].where.endswith("users.py:3")
    assert all("stale" not in d.text for d in found)


def test_a_save_and_a_deletion_update_the_index(tmp_path: Path) -> None:
    _tree(tmp_path)
    index = WorkspaceIndex()
    index.build([tmp_path])
    other = tmp_path / "pkg" / "roles.py"
    other.write_text(PATTERN.format("roles").replace("dict(r)", "Role(**r)"))
    uri = (tmp_path / "pkg" / "groups.py").as_uri()
    assert index.update(other)
    texts = [d.text for d in index.drafts(uri, HOLE, CURSOR)]
    assert "result = [Role(**r) for r in rows]" in texts
    index.remove(other)
    texts = [d.text for d in index.drafts(uri, HOLE, CURSOR)]
    assert "result = [Role(**r) for r in rows]" not in texts
    assert not index.update(tmp_path / "build" / "out.py")  # ignored stays out
    assert not index.update(tmp_path / "pkg" / "notes.txt")  # not source
