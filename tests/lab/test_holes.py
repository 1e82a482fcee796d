"""One evaluation hole in lab/ (holes.Hole): no other lab module declares a hole-like dataclass,
and every evaluation's holes (HumanEval infilling, the span evaluation's held-out holes, the
model report's lines and bodies, the cross-file cases) are that type, cut and filled the same
way."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import dllm_lab
from dllm_lab.corpus import is_held_out
from dllm_lab.eval_crossfile import crossfile_holes
from dllm_lab.evaluate import heldout_bodies, heldout_lines
from dllm_lab.holes import Hole, draw, holes
from dllm_lab.humaneval import humaneval_holes
from dllm_lab.span_eval import corpus_holes

LAB = Path(dllm_lab.__file__).parent
HOLE_FIELDS = {"prefix", "suffix", "middle"}
TEXT = "".join(f"def f{i}(x):\n    y = x + {i}\n    return y * 2\n\n\n" for i in range(8))


def _dataclass_fields(path: Path) -> dict[str, set[str]]:
    out = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and any(
            "dataclass" in ast.unparse(d) for d in node.decorator_list
        ):
            out[node.name] = {
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
    return out


def test_no_lab_module_declares_a_hole_of_its_own() -> None:
    own = [
        f"{path.name}: {name}"
        for path in sorted(LAB.glob("*.py"))
        for name, fields in _dataclass_fields(path).items()
        if fields & HOLE_FIELDS and (path.name, name) != ("holes.py", "Hole")
    ]
    assert own == []


def test_every_evaluation_cuts_its_holes_as_the_one_hole(tmp_path: Path) -> None:
    row = {
        "prompt": "def inc(x):\n",
        "canonical_solution": "    return x + 1\n",
        "suffix": "\n",
        "test": "def check(f):\n    assert f(1) == 2\n",
        "entry_point": "inc",
    }
    (problem,) = humaneval_holes([row])
    assert problem.check == "def check(f):\n    assert f(1) == 2\n\ncheck(inc)\n"
    assert problem.filled(problem.middle) == row["prompt"] + row["canonical_solution"] + "\n"
    found = [
        *corpus_holes("multi-line", [TEXT], 2, seed=0),
        *heldout_lines([TEXT], 2, seed=0),
        *heldout_bodies([TEXT], 2, seed=0),
        *holes(TEXT, "python", "line", random.Random(0), 2),
    ]
    assert len(found) == 8 and all(type(h) is Hole for h in [problem, *found])
    for h in found:
        assert h.filled(h.middle) == TEXT and h.check is None and h.language_id == "python"

    # a held-out module of a package that uses a name its sibling defines
    user = next(f"pkg/user_{i}.py" for i in range(1000) if is_held_out(f"pkg/user_{i}.py"))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "helpers.py").write_text("def frobnicate(x):\n    return x\n")
    head = f'"""{"a module of the package " * 8}"""\n\n\n'
    text = f"{head}{TEXT}def g(y):\n    return frobnicate(y)\n\n\nprint(g(1))\n"
    (tmp_path / user).write_text(text)
    (case,) = crossfile_holes(5, 0, root=tmp_path)
    assert type(case.hole) is Hole and case.hole.origin == user
    assert case.hole.filled(case.hole.middle) == text and case.hole.check is None


def test_a_cut_hole_reads_back_as_its_parts() -> None:
    hole = Hole.cut("a = ", "f(x)", "\nb = 2\n", "expression", origin="pkg/m.py")
    assert (hole.text, hole.offset) == ("a = \nb = 2\n", 4)
    assert (hole.prefix, hole.middle, hole.suffix) == ("a = ", "f(x)", "\nb = 2\n")
    assert hole.filled("g(y)") == "a = g(y)\nb = 2\n" and hole.origin == "pkg/m.py"


def test_a_repository_s_holes_are_drawn_without_repeats() -> None:
    # two small files hold 8 statement holes in all; asked for 20, each comes once
    files = [(Path("a.py"), "x = 1\ny = 2\nz = 3\nw = 4\n"), (Path("b.py"), TEXT[:60])]
    every = sum(len(holes(t, "python", "statement", random.Random(0), 99)) for _, t in files)
    drawn = draw(files, "python", "statement", random.Random(0), 20)
    keys = [(p, h.offset, h.middle) for p, h in drawn]
    assert len(keys) == len(set(keys)) == every >= 4
    assert draw(files, "python", "statement", random.Random(0), 3) == drawn[:3]  # reproducible
