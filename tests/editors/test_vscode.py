"""The VS Code extension (vscode-client) in code-server (VS Code 1.100 in a browser), driven by
headless chromium, against the real server with the builtin model: drive_vscode.js's full
scenario (code_server.py starts code-server and runs it), whose steps are checked here. Off
unless DLLM_EDITOR_TESTS=1 (`make editor-test`); DLLM_VSCODE_TESTS=0 skips this file alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from code_server import HERE, SCREENS, SERVER, SKIPS, drive, versions

pytestmark = SKIPS

STEPS = [
    "browser",
    "workbench",
    "open",
    "status_item",
    "ready",
    "ghost",
    "accept",
    "partial",
    "counts",
    "commands",
    "fill_asks",
    "fill",
    "show_status",
    "comment",
    "snooze",
    "missing_server",
]


def test_extension_in_code_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = {
        "dllm.serverPath": str(SERVER),
        "dllm.device": "cpu",
        # the builtin model's fills on automatic triggers too, as the steps expect
        "dllm.drafts.trustModel": True,
        # code-server (VS Code for the web) saves 1 s after each edit by default, and then
        # File: Revert File, which the partial step drops its tries with, reverts nothing
        "files.autoSave": "off",
    }
    run = drive(tmp_path, HERE / "data" / "sample.py", settings, "full")
    run.check(STEPS)
    by_step = run.by_step
    shots = sorted(str(p) for p in SCREENS.glob("vscode-*.png"))
    with capsys.disabled():
        print(
            f"\ncode-server {versions()}, {by_step['browser']['version']}: "
            f".vsix installed in {run.install_s:.1f} s; after "
            f"launching code-server: workbench {by_step['workbench']['t']:.1f} s, model ready "
            f"{by_step['ready']['t']:.1f} s, first ghost text {by_step['ghost']['t']:.1f} s "
            f"({by_step['ghost']['after_typing_s']:.1f} s after typing), function filled "
            f"{by_step['fill']['t']:.1f} s; status: {by_step['show_status']['line']}\n"
            f"screenshots: {' '.join(shots)}"
        )
