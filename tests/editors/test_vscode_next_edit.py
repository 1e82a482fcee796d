"""Next edits in VS Code (vscode-client/nextEdit.js) in code-server, driven by headless
chromium against the real server: a parameter renamed by typing, the server's
`textDocument/copilotInlineEdit` proposes the same rename at its use on the next line, shown there
as a marker and a preview; Tab goes to it, Tab again applies it, and the server counts one
accepted next edit of kind "rename"; a second rename's preview goes with Esc and leaves the
document as typed. With `dllm.nextEdits.enabled` off the same rename shows and counts nothing.
drive_vscode_next_edit.js does the editing (code_server.py starts code-server). Off unless
DLLM_EDITOR_TESTS=1, like test_vscode.py, whose code-server install it shares.

The screenshots are build/editor-screens/vscode-next-edit-*.png (printed at the end); the
preview and the applied edit are also copied to /tmp/shots/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from code_server import SCREENS, SERVER, SKIPS, drive

pytestmark = SKIPS

TEXT = "def area(w, h):\n    return w * h\n"
STEPS = ["browser", "workbench", "open", "ready", "preview", "jump", "apply", "counts", "dismiss"]
SHOTS = Path("/tmp/shots")
DRIVER = "drive_vscode_next_edit.js"


def test_next_edit_goes_applies_counts_and_dismisses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "area.py"
    source.write_text(TEXT)
    settings = {"dllm.serverPath": str(SERVER), "dllm.device": "cpu"}
    run = drive(tmp_path / "vscode", source, settings, "next-edit", driver=DRIVER)
    run.check(STEPS)
    steps = run.by_step

    preview = steps["preview"]["view"]
    assert preview["markers"] == [2], run.report  # the marker at the edit's line only
    assert preview["lines"][1] == "    return wwidth * h", run.report  # `w` struck, `width` after
    assert preview["struck"] == ["w"], run.report
    assert "next edit at line 2" in preview["lines"][0], run.report  # the hint at the cursor

    jump = steps["jump"]["view"]
    assert jump["cursor"] == {"line": 2, "column": 12}, run.report  # at the `w`
    assert jump["lines"][0] == "def area(width, h):", run.report  # Tab typed nothing
    # now inline: `width` after the struck `w`, and the keys at the line's end
    assert jump["lines"][1] == "    return wwidth * h⇥ Tab: apply · Esc: dismiss", run.report

    assert steps["apply"]["text"] == "def area(width, h):\n    return width * h\n"
    # dllm/status's counts per kind: the rename shown and accepted, once each
    assert "next edits: 1 shown, 1 accepted (rename 1/1)" in steps["counts"]["line"], run.report
    assert steps["dismiss"]["text"] == "def area(width, height):\n    return width * h\n"

    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(steps["preview"]["screenshot"], SHOTS / "vscode_next_edit_preview.png")
    shutil.copy(steps["apply"]["screenshot"], SHOTS / "vscode_next_edit_applied.png")
    shots = sorted(str(p) for p in SCREENS.glob("vscode-next-edit-*.png"))
    with capsys.disabled():
        print(
            f"\nnext edit previewed {steps['preview']['after_typing_s']:.1f} s after typing; "
            f"status: {steps['counts']['line']}\nscreenshots: {' '.join(shots)}"
        )


def test_next_edits_off_shows_and_counts_none(tmp_path: Path) -> None:
    source = tmp_path / "area.py"
    source.write_text(TEXT)
    settings = {
        "dllm.serverPath": str(SERVER),
        "dllm.device": "cpu",
        "dllm.nextEdits.enabled": False,
    }
    run = drive(tmp_path / "vscode", source, settings, "next-edit-off", driver=DRIVER)
    run.check(["browser", "workbench", "open", "ready", "off"])
    off = run.by_step["off"]
    assert off["drawn"] is None and off["view"]["markers"] == [], run.report
    assert off["view"]["lines"][:2] == ["def area(width, h):", "    return w * h"], run.report
    assert "next edits" not in off["line"], run.report
