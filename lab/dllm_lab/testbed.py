"""A repository-level testbed in the style of llm-ls's: holes in a real repository, filled
through the language server with the repository open as its workspace, each fill judged by the
repository's own tests.

    python -m dllm_lab.testbed REPO [--holes 30] [--json OUT]

Holes are single lines (lab/holes.py: `statement`, `line`) of the source files that have a test
file named after them (`test_<module>.py`, anywhere in the repository). A hole is kept only when
its tests tell: they pass with the true line and fail with the line replaced by a `raise` (so
they run it). Each kept hole's document is opened whole in a language server
(eval_drafts.ask_all: automatic, then invoked), and the first invoked item is
written into a copy of the repository whose tests run in the evaluation sandbox (sandbox.py:
no network, limits, a timeout): pass@1 is the share whose tests pass. Drafts on and off, the
same holes, side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from .eval_drafts import ask_all, repo_holes
from .holes import Hole
from .sandbox import run_sandboxed

TEST_TIMEOUT_S = 60.0


def find_tests(root: Path, source: Path) -> Path | None:
    """The test file named after `source`'s module, when the repository has one."""
    found = sorted(root.rglob(f"test_{source.stem}.py"))
    return found[0] if found else None


def _program(repo: Path, tests: Path) -> str:
    # no plugins of this environment's pytest: the repository's tests ask for none, and some
    # (asyncio's) import ssl, which the sandbox's socket stand-in breaks
    return (
        "import os, sys\n"
        "os.environ['PYTEST_DISABLE_PLUGIN_AUTOLOAD'] = '1'\n"
        f"sys.path.insert(0, {str(repo)!r})\n"
        "import pytest\n"
        f"sys.exit(pytest.main(['-x', '-q', '-p', 'no:cacheprovider', {str(tests)!r}]))\n"
    )


def passes(root: Path, source: Path, text: str, tests: Path) -> bool:
    """Whether `tests` pass in a copy of the repository with `source` holding `text`."""
    with tempfile.TemporaryDirectory(prefix="dllm-testbed-") as tmp:
        repo = Path(tmp) / root.name
        shutil.copytree(root, repo, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        (repo / source.relative_to(root)).write_text(text)
        program = _program(repo, repo / tests.relative_to(root))
        return run_sandboxed(program, timeout=TEST_TIMEOUT_S, cpu_seconds=int(TEST_TIMEOUT_S))


def broken(hole: Hole) -> str:
    """The document with the hole's whole line replaced by a `raise` at its indentation: tests
    that still pass never run the line, and cannot judge a fill of it."""
    start = hole.text.rfind("\n", 0, hole.offset) + 1
    end = hole.text.find("\n", hole.offset)
    end = len(hole.text) if end < 0 else end
    line = hole.text[start:end]
    indent = line[: len(line) - len(line.lstrip())]
    return hole.text[:start] + indent + "raise RuntimeError('hole')" + hole.text[end:]


def telling_holes(root: Path, n: int, seed: int) -> list[tuple[Path, Hole, Path]]:
    """Up to n holes whose tests pass with the true line and fail with it broken."""
    kept = []
    for path, hole in repo_holes(root, n * 6, seed, only=lambda p: find_tests(root, p) is not None):
        tests = find_tests(root, path)
        assert tests is not None
        if passes(root, path, hole.filled(hole.middle), tests) and not passes(
            root, path, broken(hole), tests
        ):
            kept.append((path, hole, tests))
            print(f"testbed: {len(kept)}/{n} holes", file=sys.stderr)
            if len(kept) >= n:
                break
    return kept


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dllm_lab.testbed",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("repo", type=Path, help="a Python repository with pytest tests")
    ap.add_argument("--holes", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    a = ap.parse_args(argv)
    root = a.repo.resolve()
    if not root.is_dir():
        print(f"testbed: {root} is not a folder", file=sys.stderr)
        return 2
    cases = telling_holes(root, a.holes, a.seed)
    if not cases:
        print("testbed: no hole whose tests tell a right line from a broken one", file=sys.stderr)
        return 1
    server = [str(Path(sys.executable).parent / "dllm-infill-ls")]
    report: dict[str, Any] = {"repo": root.name, "holes": len(cases)}
    for mode in ("off", "on"):
        answers, _ = asyncio.run(
            ask_all(root, [(p, h) for p, h, _ in cases], mode == "on", server, a.model)
        )
        ok = exact = 0
        for (path, hole, tests), answer in zip(cases, answers, strict=True):
            text = answer.invoked or ""
            exact += text.strip() == hole.middle.strip()
            ok += passes(root, path, hole.filled(text), tests)
        report[mode] = {"pass@1": ok / len(cases), "exact": exact / len(cases)}
    print(f"{root.name}: {len(cases)} holes whose tests tell")
    for mode in ("off", "on"):
        r = report[mode]
        p1, ex = 100 * r["pass@1"], 100 * r["exact"]
        print(f"  drafts {mode:<3}  pass@1 {p1:5.1f} %  exact {ex:5.1f} %")
    if a.json is not None:
        a.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
