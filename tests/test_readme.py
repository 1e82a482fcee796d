"""Every command the README names exists as written: each `dllm-infill` subcommand, each
`dllm-infill-ls` command and each `python -m` module takes `--help` and lists every flag the
README gives it; each `make` target is in the Makefile, each `npm run` script in the extension's
package.json, each `pip install` extra in pyproject.toml. The commands run as a user runs them
(the console scripts of this environment), so a renamed flag or subcommand fails here."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import ROOT

README = ROOT / "README.md"
BIN = Path(sys.executable).parent
SCRIPTS = ("dllm-infill", "dllm-infill-ls")


def shell_lines(text: str) -> list[str]:
    """The command lines of the ```sh blocks (continuations joined), then the inline `dllm-infill
    ...` spans of the prose."""
    blocks = re.findall(r"```(?:sh|bash)\n(.*?)```", text, re.S)
    lines = [ln for b in blocks for ln in b.replace("\\\n", " ").splitlines() if ln.strip()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return lines + re.findall(r"`((?:\.venv/bin/)?dllm-infill[^`]*)`", prose)


def named(line: str) -> tuple[tuple[str, ...], list[str]] | None:
    """(the --help call that shows the command's options, the flags the line gives it), or None
    for a line that runs no command of this project."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # an unclosed quote in an inline span cut short: not a command line
        return None
    for i, word in enumerate(words):
        name = Path(word).name
        rest = words[i + 1 :]
        if name in SCRIPTS:
            sub = rest[:1] if rest and not rest[0].startswith("-") else []
            if name == "dllm-infill-ls" and sub != ["stats"]:
                sub = []
            return (name, *sub), [w.split("=")[0] for w in rest if w.startswith("-")]
        ours = len(rest) > 1 and rest[1].split(".")[0] in (
            "infill_engine",
            "lsp_server",
            "dllm_lab",
        )
        if name.startswith("python") and rest[:1] == ["-m"] and ours:
            return ("-m", rest[1]), [w.split("=")[0] for w in rest[2:] if w.startswith("-")]
    return None


def help_text(call: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, *call] if call[0] == "-m" else [str(BIN / call[0]), *call[1:]]
    return subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_every_command_and_flag_the_readme_names_exists() -> None:
    wanted: dict[tuple[str, ...], dict[str, str]] = {}
    for line in shell_lines(README.read_text()):
        found = named(line)
        if found is not None:
            call, flags = found
            wanted.setdefault(call, {}).update({f: line for f in flags})
    assert ("dllm-infill", "fill") in wanted and ("dllm-infill-ls", "stats") in wanted, wanted
    assert ("-m", "dllm_lab.span_calibrate") in wanted
    with ThreadPoolExecutor(4) as pool:
        helps = dict(zip(wanted, pool.map(help_text, wanted), strict=True))
    for call, flags in wanted.items():
        p = helps[call]
        assert p.returncode == 0, (call, p.stderr[-2000:])
        for flag, line in flags.items():
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", p.stdout), (
                f"README: {line.strip()!r}: {' '.join(call)} has no {flag}"
            )


def test_make_targets_npm_scripts_and_extras_the_readme_names_exist() -> None:
    text = README.read_text()
    lines = shell_lines(text) + re.findall(r"`([^`\n]+)`", text)
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    package = json.loads((ROOT / "vscode-client" / "package.json").read_text())
    pyproject = (ROOT / "pyproject.toml").read_text()  # no tomllib on Python 3.10
    section = pyproject.split("[project.optional-dependencies]")[1].split("\n[")[0]
    extras = set(re.findall(r"^([\w-]+)\s*=", section, re.M))
    made = {m for ln in lines for m in re.findall(r"\bmake ([\w-]+)", ln)}
    runs = {m for ln in lines for m in re.findall(r"\bnpm run ([\w-]+)", ln)}
    asked = {m for ln in lines for m in re.findall(r"pip install -e '\.\[([\w,-]+)\]'", ln)}
    assert {"demo", "test"} <= made and runs == {"package"}, (made, runs)
    assert made <= targets, made - targets
    assert runs <= set(package.get("scripts", {})), runs
    assert {e for a in asked for e in a.split(",")} <= extras, asked
    # VS Code's packaging is the npm script; npx would prompt for the tool and warn
    assert "npx @vscode/vsce" not in text
    # the hub's current command; huggingface_hub no longer ships huggingface-cli
    assert "huggingface-cli" not in text


DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]


def test_every_test_path_the_docs_name_exists() -> None:
    """Each test path README.md and docs/ name (`tests/lsp/test_x.py`, a glob such as
    `tests/lsp/test_robustness_*.py`, or a bare `test_x.py`) names a file that is there: a test
    moved to another folder takes its mentions with it."""
    stale = []
    for doc in DOCS:
        text = doc.read_text()
        for path in re.findall(r"\btests/[\w./*-]*\w", text):
            if not list(ROOT.glob(path)) and not (ROOT / path).exists():
                stale.append(f"{doc.name}: {path}")
        for name in re.findall(r"(?<![\w/*])(test_[\w*]+\.py)\b", text):
            if not list((ROOT / "tests").rglob(name)):
                stale.append(f"{doc.name}: {name}")
    assert not stale, stale
