"""The routes' evaluation (lab/eval_routes.py) on a tiny folder written here: its holes, and one
end-to-end run of 3 holes through the real language server and the real engine service (the
builtin model): the report's shape, and its counts add up."""

from __future__ import annotations

from pathlib import Path

from dllm_lab.corpus import stdlib_root
from dllm_lab.eval_routes import ALL_ROUTES, cut_holes, evaluate, unseen

MODULE = '''"""A small module: enough lines for a few holes."""

import os


def join(parts):
    total = []
    for part in parts:
        total.append(os.fspath(part))
    return "/".join(total)


class Box:
    def __init__(self, value):
        self.value = value

    def double(self):
        return Box(self.value * 2)
'''
OTHER = "def area(width, height):\n    result = width * height\n    return result\n"


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "shapes.py").write_text(MODULE)
    (tmp_path / "pkg" / "area.py").write_text(OTHER)
    (tmp_path / "pkg" / "tests").mkdir()  # tests are left out
    (tmp_path / "pkg" / "tests" / "test_x.py").write_text("def test_x():\n    assert True\n")
    return tmp_path


def test_holes_take_one_line_after_its_indentation(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    cases, eligible = cut_holes([folder], 5, seed=3)
    assert eligible == 2 and len(cases) == 5
    assert len({(c.origin, c.line) for c in cases}) == 5  # no line twice
    assert {Path(c.origin).name for c in cases[:2]} == {"shapes.py", "area.py"}  # in turn
    for c in cases:
        assert c.compiles and len(c.truth) >= 8 and not c.truth[0].isspace()
        assert c.before + c.truth + c.after == c.original  # the line's text, its indent kept
        assert c.text.split("\n")[c.line] == c.text[c.offset - c.column : c.offset]
        assert c.exact(f" {c.truth} ") and not c.breaks("") and not c.breaks(c.truth)
        assert c.breaks("def (:")
    assert cut_holes([folder], 3, seed=3)[0] == cases[:3]  # a fixed seed, the same holes


def test_held_out_means_neither_the_model_nor_the_gate_read_it() -> None:
    assert not unseen(stdlib_root() / "asyncio" / "held.py")  # the gate's calibration
    assert unseen(Path("/nowhere/else/mod.py"))  # outside both trees


def test_three_holes_through_both_servers_add_up(tmp_path: Path) -> None:
    out = evaluate([_folder(tmp_path)], holes=3, seed=1)
    assert out["holes"] == 3 and out["files"] == 2 and out["originals_compiling"] == 3
    assert set(out["routes"]) == set(ALL_ROUTES)
    lsp = out["lsp"]
    assert lsp["holes"] == 3 and 0 <= lsp["exact"] <= lsp["answered"] <= 3
    # a hole whose document no longer compiles (a header taken out) may keep it broken: counted
    assert 0 <= lsp["adds_syntax_error_hole_compiled"] <= lsp["adds_syntax_error"] <= 3
    for route, f in out["routes"].items():
        assert f["holes"] == 3, route
        assert f["agree"] + f["disagree"] == 3
        assert f["lsp_shown"] == lsp["answered"]
        assert 0 <= f["agree_shown"] <= f["lsp_shown"] and f["agree_shown"] <= f["agree"]
        assert 0 <= f["adds_syntax_error"] <= f["answered"] <= 3 and f["exact"] <= 3
        assert f["p50_ms"] is not None and f["p50_ms"] > 0
        if route in out["disagreements"]:
            d = out["disagreements"][route]
            assert sum(d["reasons"].values()) == f["disagree"] == len(d["first"])
            assert all({"lsp", "route", "truth", "reason"} <= set(x) for x in d["first"])
            assert d["under_95"] == (f["agree"] < 0.95 * 3)
        else:
            assert f["agree"] == 3
    assert [len(c["answers"]) for c in out["cases"]] == [1 + len(ALL_ROUTES)] * 3


def test_fill_reads_the_workspace_the_server_reads(tmp_path: Path) -> None:
    """With --workspace both sides index the folder (the language server's workspace folder,
    fill's own index, built the same way: the same files) and fill answers every hole as the
    server's first item."""
    out = evaluate([_folder(tmp_path)], holes=3, seed=1, routes=["fill"], workspace=True)
    both = out["workspace"]
    assert both["lsp"]["files"] == both["fill"]["files"] == 3, both
    assert out["routes"]["fill"]["agree"] >= 2, out["disagreements"]
