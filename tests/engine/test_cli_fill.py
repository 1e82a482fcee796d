"""`dllm-infill fill` prints what an editor shows: the model's text through the language
server's finishing steps and syntax check (infill_engine/finish), `--raw` the bare text; and a
fresh clone's `make demo` prints code that parses in its file. Real CLI subprocesses."""

from __future__ import annotations

import ast
import json
import shlex
import subprocess
import sys
from pathlib import Path

from infill_engine.finish import finish
from infill_engine.repeat import find_loop

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "infill_engine.cli"]


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=ROOT)


def demo_command() -> list[str]:
    """The Makefile's `demo` recipe, with the venv's entry point as this interpreter's module."""
    lines = (ROOT / "Makefile").read_text().split("\n")
    recipe = lines[lines.index("demo: $(STAMP)") + 1]
    assert recipe.startswith("\t$(VENV)/bin/dllm-infill "), recipe
    return CLI + shlex.split(recipe.removeprefix("\t$(VENV)/bin/dllm-infill "))


def splice(text: str, line: int, col: int, new: str) -> str:
    lines = text.split("\n")
    lines[line - 1] = lines[line - 1][: col - 1] + new + lines[line - 1][col - 1 :]
    return "\n".join(lines)


def test_make_demo_prints_code_that_parses_in_its_file() -> None:
    """The demo prints what an editor shows at its hole (the language server's finish of the
    model's raw text, ranked with the drafts: here a line of the file itself), and that parses
    in the file; --no-drafts prints the model's own fill, finished."""
    cmd = demo_command()
    p = run(cmd)
    assert p.returncode == 0, p.stderr
    shown = p.stdout.removesuffix("\n")
    assert shown.strip(), "the demo's hole is one the builtin model fills"
    path = cmd[cmd.index("fill") + 1]
    line, col = int(cmd[cmd.index("--line") + 1]), int(cmd[cmd.index("--col") + 1])
    text = (ROOT / path).read_text()
    compile(ast.parse(splice(text, line, col, shown)), path, "exec")
    out = json.loads(run([*cmd, "--json"]).stdout)
    assert out["text"] == shown
    # the demo shows a draft at work: a line of the file whose neighbours match the hole's
    assert out["source"] == "document" and shown == out["drafts"][0]["text"]
    assert "a draft (document, line 3" in p.stderr
    offset = len(splice(text, line, col, "\0").split("\0")[0])
    alone = json.loads(run([*cmd, "--json", "--no-drafts"]).stdout)
    assert alone["source"] == "model" and alone["drafts"] == []
    assert finish(alone["raw"], text[:offset], text[offset:], "python") == alone["text"]


def test_fill_prints_the_finished_text_and_raw_the_bare_one(tmp_path: Path) -> None:
    """The hole of issue 32: the builtin model loops (`path.path.path.`); an editor shows none
    of it, and neither does `fill` (nothing, with a word on stderr, when nothing else is left);
    --raw and --json keep the model's text."""
    src = tmp_path / "read.py"
    text = "with open(path) as f:\n    \n"
    src.write_text(text)
    where = [str(src), "--line", "2", "--col", "5"]
    p = run([*CLI, "fill", *where, "--json"])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert find_loop(out["raw"]) is not None and out["stop_reason"] == "syntax", out
    assert find_loop(out["text"]) is None and "path.path" not in out["text"]
    assert out["tokens"] <= 64  # stopped once the loop was certain, not at the 192-token cap
    plain = run([*CLI, "fill", *where])
    assert plain.returncode == 0 and plain.stdout == out["text"] + "\n"
    if not out["text"]:
        assert plain.stderr.strip().startswith("dllm-infill fill: nothing to show")
    raw = run([*CLI, "fill", *where, "--raw"])
    assert raw.returncode == 0 and raw.stdout == out["raw"] + "\n"


# A line that stands only in pkg/users.py; groups.py has the same function with that line cut out.
LINE = 'rows = db.query("SELECT name FROM t WHERE a = 1")'
USERS = f"import os\n\n\ndef users(db):\n    {LINE}\n    return rows\n"
HOLED = "import os\n\n\ndef groups(db):\n    \n    return rows\n"
HIDDEN = 'rows = db.query("SELECT key FROM vault WHERE secret = 1")'


def _fill(path: Path, *more: str) -> tuple[dict, str]:  # type: ignore[type-arg]
    p = run([*CLI, "fill", str(path), "--line", "5", "--col", "5", "--json", *more])
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def _repo(root: Path) -> Path:
    """A repository (a `.git` folder) with the line in one file, the hole in another, and the
    same hole's best line in hidden places: a hidden file, a hidden folder, a `.env`."""
    (root / ".git").mkdir(parents=True)
    (root / "pkg").mkdir()
    (root / "pkg" / "users.py").write_text(USERS)
    (root / "pkg" / "groups.py").write_text(HOLED)
    hidden = USERS.replace(LINE, HIDDEN).replace("users", "groups")
    (root / "pkg" / ".groups.py").write_text(hidden)
    (root / ".venv").mkdir()
    (root / ".venv" / "groups.py").write_text(hidden)
    (root / ".env").write_text(f"{HIDDEN}\nAPI_KEY=sk-live-0123456789abcdef0123456789abcdef\n")
    return root / "pkg" / "groups.py"


def test_fill_drafts_from_the_repository_the_file_is_in(tmp_path: Path) -> None:
    """By default `fill` reads the file's repository as the language server reads its
    workspace: the line that stands only in another file is drafted and shown, and it says
    where it came from (stderr, and each draft's source and where in --json); nothing hidden
    is ever read."""
    holed = _repo(tmp_path / "repo")
    out, err = _fill(holed)
    assert out["text"] == LINE and out["source"] == "workspace", out
    assert "a draft (workspace, pkg/users.py:5," in err, err
    first = out["drafts"][0]
    assert (first["source"], first["where"]) == ("workspace", "pkg/users.py:5")
    assert out["workspace"]["root"] == str((tmp_path / "repo").resolve())
    assert out["workspace"]["files"] == 2  # users.py and groups.py: nothing hidden
    assert "vault" not in json.dumps(out) and "sk-live" not in json.dumps(out) + err
    alone, err = _fill(holed, "--no-workspace")
    assert alone["workspace"] is None and LINE not in json.dumps(alone)
    assert all(d["source"] != "workspace" for d in alone["drafts"])


def test_fill_workspace_names_another_folder(tmp_path: Path) -> None:
    """--workspace DIR reads that folder instead: a file outside any repository drafts from
    it; without it, from the file's own folder alone."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "users.py").write_text(USERS)
    holed = tmp_path / "scratch" / "groups.py"
    holed.parent.mkdir()
    holed.write_text(HOLED)
    out, _ = _fill(holed, "--workspace", str(lib))
    assert out["text"] == LINE and out["drafts"][0]["where"] == "users.py:5", out
    own, _ = _fill(holed)
    assert own["workspace"]["root"] == str(holed.parent.resolve())
    assert LINE not in json.dumps(own)
    bad = run([*CLI, "fill", str(holed), "--line", "5", "--col", "5", "--workspace", "/nowhere"])
    assert bad.returncode == 2 and "--workspace /nowhere: not a folder" in bad.stderr


def test_fill_in_a_language_the_model_does_not_know_shows_drafts_alone(tmp_path: Path) -> None:
    """As the language server: in Go the builtin model's fills are never shown (it knows
    Python), the drafts are, from the workspace too."""
    (tmp_path / ".git").mkdir()
    body = "\ttotal := a + b\n\treturn total\n}\n"
    (tmp_path / "sum.go").write_text(f"package m\n\nfunc Sum(a int, b int) int {{\n{body}")
    holed = tmp_path / "add.go"
    holed.write_text("package m\n\nfunc Add(a int, b int) int {\n\t\n\treturn total\n}\n")
    p = run([*CLI, "fill", str(holed), "--line", "4", "--col", "2", "--json"])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["text"] == "total := a + b" and out["source"] == "workspace", out
    alone = json.loads(run([*CLI, "fill", str(holed), "--line", "4", "--col", "2", "--json",
                            "--no-drafts"]).stdout)  # fmt: skip
    assert alone["raw"] and alone["text"] == "", alone


def test_fill_model_languages_says_where_the_models_fill_is_shown() -> None:
    """The README's hole, drafts off: the builtin model's fill is shown in Python, and not
    once the setting says the model knows Go alone."""
    base = [*demo_command(), "--no-drafts", "--json"]
    shown = json.loads(run(base).stdout)
    assert shown["text"] and shown["source"] == "model", shown
    told = json.loads(run([*base, "--model-languages", "go"]).stdout)
    assert told["raw"] == shown["raw"] and told["text"] == "", told
