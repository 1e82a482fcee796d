"""The repository testbed and the drafts evaluation on a small repository written here: a hole is
kept only where the repository's own tests tell the right line from a broken one (run in the
sandbox), and the language server answers every hole, drafts on, through eval_drafts.ask_all."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from dllm_lab.eval_drafts import ask_all, repo_holes
from dllm_lab.testbed import broken, find_tests, passes, telling_holes

SOURCE = """def double(x):
    y = x
    result = y * 2
    return result


def triple(x):
    y = x
    result = y * 3
    return result


def name_of(x):
    y = x
    label = str(y)
    return label
"""
TESTS = """from pkg.mod import double, name_of, triple


def test_double():
    assert double(4) == 8


def test_triple():
    assert triple(2) == 6
"""


def _repo(root: Path) -> Path:
    (root / "pkg" / "tests").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text(SOURCE)
    (root / "pkg" / "tests" / "test_mod.py").write_text(TESTS)
    return root / "pkg" / "mod.py"


def test_holes_are_kept_only_where_the_tests_tell(tmp_path: Path) -> None:
    source = _repo(tmp_path)
    tests = find_tests(tmp_path, source)
    assert tests == tmp_path / "pkg" / "tests" / "test_mod.py"
    kept = telling_holes(tmp_path, 10, seed=0)
    assert kept, "the doubled and tripled results are tested"
    for path, hole, _ in kept:
        assert path == source and "label" not in hole.middle  # name_of is not tested
        assert passes(tmp_path, path, hole.filled(hole.middle), tests)
        assert not passes(tmp_path, path, broken(hole), tests)


def test_the_language_server_answers_each_hole(tmp_path: Path) -> None:
    _repo(tmp_path)
    cases = repo_holes(tmp_path, 2, seed=0)
    server = [str(Path(sys.executable).parent / "dllm-infill-ls")]
    answers, status = asyncio.run(ask_all(tmp_path, cases, True, server, "builtin"))
    assert len(answers) == len(cases) >= 2
    assert all(a.invoked is not None and a.invoked_ms > 0 for a in answers)
    assert status["workspace"]["ready"] and status["workspace"]["files"] == 3
