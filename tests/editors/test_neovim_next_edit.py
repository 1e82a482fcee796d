"""Next edits in the Neovim plugin (editors/nvim/lua/dllm/next_edit.lua), in a real headless
Neovim 0.11 and 0.12 against the real server: after `w` is renamed `width` in
`def area(w, h):`, the server's next edit (textDocument/copilotInlineEdit) is previewed with
extmarks (the `w` of `return w * h` marked deleted, `width` inline after it, a sign on its
line); <Tab> goes to that line, <Tab> again applies it and the server counts one accepted
"rename"; in a second file <Esc> dismisses the same preview and leaves the text alone.

drive_next_edit.lua does the editing and writes one JSON line per step, and the screen (every
cell read back after a redraw) as text: $DLLM_SHOTS (/tmp/shots by default) gets
nvim_next_edit_preview.txt and nvim_next_edit_applied.txt. Off unless DLLM_EDITOR_TESTS=1
(`make editor-test`), like test_neovim.py, whose Neovim installs it shares.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_neovim import NEOVIMS, ROOT, SERVER, Neovim, install

pytestmark = pytest.mark.skipif(
    os.environ.get("DLLM_EDITOR_TESTS") != "1",
    reason="editor tests run with DLLM_EDITOR_TESTS=1 (make editor-test)",
)

HERE = Path(__file__).resolve().parent
TEXT = "def area(w, h):\n    return w * h\n"
RENAMED = ["def area(width, h):", "    return w * h"]
APPLIED = ["def area(width, h):", "    return width * h"]


def rename_counts(status_next_edits: dict[str, Any]) -> dict[str, Any]:
    """dllm/status's counts of rename suggestions: {suggested, shown, accepted}."""
    kinds = status_next_edits.get("kinds") or {}
    return dict(kinds.get("rename") or {})


def run_driver(binary: Path, work: Path, shots: Path) -> tuple[dict[str, Any], str]:
    (work / "area.py").write_text(TEXT)
    (work / "area2.py").write_text(TEXT)
    (work / "area3.py").write_text(TEXT)
    result = work / "result.jsonl"
    env = {
        **os.environ,
        "DLLM_LS": str(SERVER),
        "DLLM_RESULT": str(result),
        "DLLM_SHOTS": str(shots),
        "DLLM_SECOND": str(work / "area2.py"),
        "DLLM_THIRD": str(work / "area3.py"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    plugin, script = ROOT / "editors" / "nvim", HERE / "drive_next_edit.lua"
    argv = [str(binary), "--clean", "--headless", "--cmd", f"set rtp^={plugin}"]
    proc = subprocess.run(
        [*argv, "-c", f"luafile {script}", "area.py"],
        cwd=work, env=env, capture_output=True, text=True, timeout=360,
    )  # fmt: skip
    lines = result.read_text().splitlines() if result.exists() else []
    steps = {s["step"]: s for s in map(json.loads, lines)}
    return steps, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.mark.parametrize("nvim", NEOVIMS, ids=[n.label for n in NEOVIMS])
def test_next_edit_preview_jump_apply_dismiss(nvim: Neovim, tmp_path: Path) -> None:
    binary = install(nvim)
    assert SERVER.exists(), f"{SERVER} is missing: run make setup"
    # the last Neovim's screens are the ones kept
    shots = Path(os.environ.get("DLLM_SHOTS", "/tmp/shots"))
    steps, output = run_driver(binary, tmp_path, shots)
    failed = [s for s in steps.values() if not s.get("ok")]
    assert not failed, f"{failed}\n{output}"
    want = ["attach", "ready", "preview", "jump", "apply", "counts", "dismiss", "insert_mode"]
    missing = [name for name in want if name not in steps]
    assert not missing, f"steps not reached: {missing}\n{steps}\n{output}"

    # the setting reaches the server; the normal Tab while nothing is shown
    assert steps["ready"]["forwarded"] == {"enabled": True}
    assert steps["ready"]["tab"] == ""

    # the preview: `w` on line 2 marked deleted, `width` inline right after it, a sign there
    p = steps["preview"]
    assert p["lines"] == RENAMED and p["cursor"][0] == 1, p
    preview = p["preview"]
    assert preview["deleted"] == "w" and preview["deleted_at"] == [1, 11], preview
    assert preview["added"] == "width" and preview["added_at"] == [1, 12], preview
    assert preview["pos"] == "inline" and preview["added_hl"] == "DllmNextEditAdd"
    assert preview["sign_row"] == 1 and preview["sign"] == "»"
    assert p["tab"] is True  # <Tab> is the plugin's while the preview is shown

    screen = steps["shot_preview"]["screen"].splitlines()
    row = next(i for i, line in enumerate(screen) if "return wwidth * h" in line)
    assert screen[row].startswith("»"), screen
    marks = screen[row + 1]
    col = screen[row].index("wwidth")
    assert marks[col : col + 6] == "-+++++", screen  # w in the deleted colour, width the added
    assert (
        (shots / "nvim_next_edit_preview.txt").read_text().endswith(steps["shot_preview"]["screen"])
    )

    # <Tab>: to the edit's line, nothing changed yet, the preview still there (no sign now)
    jump = steps["jump"]
    assert jump["cursor"][0] == 2 and jump["preview"]["added"] == "width", jump
    assert "sign_row" not in jump["preview"]
    # <Tab> again: applied, the cursor after the new text, the preview gone from the screen
    apply = steps["apply"]
    assert apply["lines"] == APPLIED and apply["cursor"] == [2, 16], apply
    assert apply["accepted"] == 1
    applied_screen = steps["shot_applied"]["screen"]
    assert "return width * h" in applied_screen and "»" not in applied_screen
    assert (shots / "nvim_next_edit_applied.txt").read_text().endswith(applied_screen)
    # counted per kind: one rename suggested, shown and accepted
    counts = rename_counts(steps["counts"]["next_edits"])
    assert counts == {"suggested": 1, "shown": 1, "accepted": 1}, steps["counts"]

    # <Esc>: dismissed, the text as the rename left it, the normal Tab back, nothing counted
    dismiss = steps["dismiss"]
    assert dismiss["preview"]["added"] == "width", dismiss
    assert dismiss["lines"] == RENAMED == dismiss["renamed"], dismiss
    assert dismiss["mode"] == "n" and dismiss["tab"] == "" and dismiss["accepted"] == 1
    after = rename_counts(steps["counts_after"]["next_edits"])
    assert after == {"suggested": 2, "shown": 2, "accepted": 1}, steps["counts_after"]

    # the same keys in Insert mode, which they leave as it is
    insert = steps["insert_mode"]
    assert insert["mode"] == "i" and insert["preview"]["added"] == "width", insert
    assert insert["jumped_to"] == [2, 11] and insert["jumped_lines"] == RENAMED, insert
    assert insert["lines"] == APPLIED and insert["mode_after"] == "i", insert
    assert insert["accepted"] == 2, insert


SWITCH = (
    "local d = require('dllm'); d.setup({ cmd = { 'cat' }, next_edits = %s }); "
    "io.stdout:write(vim.json.encode({ sent = d.config.init_options.nextEdits, "
    "on = vim.fn.exists('#dllm_next_edit#LspAttach') == 1 }) .. '\\n')"
)


@pytest.mark.parametrize("enabled", [True, False])
def test_next_edits_switch_reaches_the_server_settings(enabled: bool) -> None:
    """`next_edits = false` sets nothing up and sends nextEdits.enabled = false; the default, the
    opposite. (`cat` stands in for the server: no buffer here starts it.)"""
    binary = install(NEOVIMS[0])
    plugin = ROOT / "editors" / "nvim"
    code = SWITCH % ("true" if enabled else "false")
    run = subprocess.run(
        [str(binary), "--headless", "-u", "NONE", "--cmd", f"set rtp^={plugin}",
         "-c", f"lua {code}", "-c", "qa!"],
        capture_output=True, text=True, timeout=30,
        env={**os.environ, "NVIM_LOG_FILE": os.devnull},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[0]) == {"sent": {"enabled": enabled}, "on": enabled}
