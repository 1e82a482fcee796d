"""The cross-file evaluation's holes (lab/eval_crossfile.py), on a package written here: each
hole's line uses a name a sibling module defines and the file itself does not, and the store is
fed the lines around that definition."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dllm_lab.corpus import is_held_out
from dllm_lab.eval_crossfile import crossfile_holes

SIBLING = "".join(f"# filler {i}\n" for i in range(100)) + "def frobnicate(x):\n    return x\n"
USER = (
    '"""A module of the package: long enough for the corpus (200 bytes or more)."""\n\n'
    "from .helpers import frobnicate\n\n\ndef own(y):\n    return y\n\n\n"
    "def main(items):\n    total = 0\n    total = own(total)\n"
    "    return [frobnicate(i) for i in items]\n\n\nprint(main([1]))\n"
)


def test_holes_use_a_name_defined_in_a_sibling_module(tmp_path: Path) -> None:
    # a name in the held-out split (corpus.is_held_out: sha1 of the path), one that is not
    user = next(f"pkg/user_{i}.py" for i in range(1000) if is_held_out(f"pkg/user_{i}.py"))
    helpers = next(
        f"pkg/helpers_{i}.py" for i in range(1000) if not is_held_out(f"pkg/helpers_{i}.py")
    )
    (tmp_path / "pkg").mkdir()
    (tmp_path / user).write_text(USER)
    (tmp_path / helpers).write_text(SIBLING)
    cases = crossfile_holes(10, 0, root=tmp_path)
    assert [c.hole.middle for c in cases] == ["    return [frobnicate(i) for i in items]\n"]
    (case,) = cases
    assert case.name == "frobnicate" and case.home == helpers and case.hole.origin == user
    uri, text, first, source = case.chunks[0]
    assert uri.endswith(helpers) and "def frobnicate(x):" in text and source == "edit"
    assert first > 0 and text.count("\n") <= 64
    assert case.hole.filled(case.hole.middle) == USER


def crossfile_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infill_engine.cli", "eval-crossfile", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_help_describes_the_evaluation_in_full() -> None:
    p = crossfile_cli("--help")
    assert p.returncode == 0
    assert "a line that uses a name defined there?" in " ".join(p.stdout.split())


@pytest.mark.parametrize("what", ["missing", "corrupt"])
def test_a_bad_model_is_one_line_before_the_corpus_is_walked(tmp_path: Path, what: str) -> None:
    model = tmp_path / "nowhere"
    if what == "corrupt":
        model.mkdir()
        (model / "config.json").write_text("{ not json")
    p = crossfile_cli("--model", str(model), "--limit", "1")
    assert p.returncode == 2, p.stdout
    assert p.stderr.startswith("dllm-infill eval-crossfile: ") and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
