"""copilot-lsp (copilotlsp-nvim/copilot-lsp), a Neovim client of Copilot's next edit
suggestions, unmodified in a real headless Neovim 0.11 and 0.12 against dllm-infill-ls: only
configuration points it here (its `copilot_ls` server's command is our server, UTF-16 the only
position encoding offered, <Tab> mapped as its README maps it). After `w` is renamed `width` in
`def area(w, h):`, it must show our next edit (the line marked deleted, the new line under it),
walk the cursor there on <Tab> and apply it on <Tab> again.

copilot-lsp is in no package registry, so a pinned copy (Apache-2.0, with its licence) is
vendored under vendor/copilot-lsp (its README names the commit). It sends
`textDocument/didShowInlineEdit` when it shows an edit but runs no command when one is applied,
so the server hears of its acceptances only as the change that follows. Off unless
DLLM_EDITOR_TESTS=1 (`make editor-test`), like the other editor tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nes_clients import HERE, SKIP, drive_client
from test_neovim import NEOVIMS, Neovim

pytestmark = SKIP

VENDORED = HERE / "vendor" / "copilot-lsp"


@pytest.mark.parametrize("nvim", NEOVIMS, ids=[n.label for n in NEOVIMS])
def test_copilot_lsp_shows_and_applies_our_next_edit(nvim: Neovim, tmp_path: Path) -> None:
    assert (VENDORED / "lsp" / "copilot_ls.lua").is_file()
    want = ("attach", "ready", "preview", "jump", "apply", "done")
    steps = drive_client(nvim, tmp_path, VENDORED, "drive_copilot_lsp.lua", want)

    assert steps["attach"]["encoding"] == "utf-16"  # what copilot-lsp assumes
    edit = steps["preview"]["edit"]
    assert edit["text"] == "width", edit
    assert edit["range"]["start"] == {"line": 1, "character": 11}, edit
    assert edit["command"]["command"] == "dllm.nextEditAccepted", edit
    preview = steps["preview"]["preview"]
    assert preview["deleted"] == "    return w * h" and preview["deleted_row"] == 1, preview
    assert preview["virt_lines"] == ["    return width * h"], preview
    assert steps["jump"]["cursor"] == [2, 11], steps["jump"]  # walked to the edit's start
    assert steps["jump"]["lines"] == steps["preview"]["lines"]  # nothing applied yet
    apply = steps["apply"]
    assert apply["lines"] == ["def area(width, h):", "    return width * h"], apply
    assert apply["cleared"], apply
    assert steps["status"]["encoding"] == "utf-16", steps["status"]
