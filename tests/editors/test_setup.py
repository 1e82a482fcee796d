"""The editor tests' set-up: the vendored llama.vim is complete and pinned, and an editor test
that was asked for (DLLM_EDITOR_TESTS=1) fails, never skips, when its set-up fails.

These run in the ordinary suite (no editor needed): each broken set-up runs the real editor test
file in a child pytest with the set-up pointed somewhere empty and checks its outcome.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENDORED = HERE / "vendor" / "llama.vim"


def test_vendored_llama_vim_is_whole_pinned_and_licensed() -> None:
    for name in ("autoload/llama.vim", "plugin/llama.vim", "LICENSE", "README.md"):
        assert (VENDORED / name).is_file(), name
    assert (VENDORED / "LICENSE").read_text().startswith("MIT License")
    readme = (VENDORED / "README.md").read_text()
    assert re.search(r"Commit: `[0-9a-f]{40}`", readme), "the README names the pinned commit"
    # the plugin the test loads is llama.vim's own FIM client
    assert "function! llama#fim(" in (VENDORED / "autoload" / "llama.vim").read_text()


def outcome(test_file: str, keyword: str, env: dict[str, str], tmp_path: Path) -> str:
    """The child pytest's summary line for one editor test run as `make editor-test` runs it."""
    child_env = {
        **os.environ,
        "DLLM_EDITOR_TESTS": "1",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        **env,
    }
    argv = [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*argv, "-k", keyword, str(HERE / test_file)],
        cwd=ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.stdout[-3000:] + done.stderr[-1000:]


@pytest.mark.parametrize(
    ("test_file", "keyword", "broken", "says"),
    [
        # no Neovim: pip may look nowhere, so the install from PyPI fails
        (
            "test_neovim.py",
            "0.11",
            {"DLLM_NVIM_DIR": "{tmp}/nvim", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "{tmp}",
             "PIP_CONFIG_FILE": os.devnull},
            "could not install",
        ),
        # code-server and puppeteer were never set up
        ("test_vscode.py", "code_server", {"DLLM_VSCODE_BUILD": "{tmp}/vscode"}, "setup_vscode.sh"),
        # a llama.vim folder that holds no plugin
        ("test_llama_vim.py", "llama_vim", {"LLAMA_VIM_DIR": "{tmp}"}, "no autoload/llama.vim"),
    ],
)  # fmt: skip
def test_an_asked_for_editor_test_fails_when_its_set_up_fails(
    test_file: str, keyword: str, broken: dict[str, str], says: str, tmp_path: Path
) -> None:
    env = {k: v.format(tmp=tmp_path) for k, v in broken.items()}
    summary = outcome(test_file, keyword, {**env, "DLLM_VSCODE_TESTS": "1"}, tmp_path)
    assert re.search(r"\b1 failed\b", summary), summary
    assert "skipped" not in summary, summary
    assert says in summary, summary
