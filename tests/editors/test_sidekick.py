"""sidekick.nvim's next edit suggestions, unmodified in a real headless Neovim 0.11 and 0.12
against dllm-infill-ls: only configuration points it here (a server named `copilot`, which is
what it looks for, running our server; its next edits enabled; <Tab> as its README maps it).
After `w` is renamed `width` in `def area(w, h):`, it must show our next edit (a sign on the
edit's line, `width` in its inline diff), jump there on <Tab>, apply it on <Tab> again and run
its command, so that dllm/status counts one rename shown and accepted.

Only its next-edit files are vendored (vendor/sidekick.nvim; its README names the commit and
why that one: the later stale-request check drops every answer on these Neovims, which pass no
request id to handlers). Off unless DLLM_EDITOR_TESTS=1 (`make editor-test`), like the other
editor tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nes_clients import HERE, SKIP, drive_client
from test_neovim import NEOVIMS, Neovim

pytestmark = SKIP

VENDORED = HERE / "vendor" / "sidekick.nvim"


@pytest.mark.parametrize("nvim", NEOVIMS, ids=[n.label for n in NEOVIMS])
def test_sidekick_shows_applies_and_reports_our_next_edit(nvim: Neovim, tmp_path: Path) -> None:
    assert (VENDORED / "lua" / "sidekick" / "nes" / "init.lua").is_file()
    want = ("attach", "ready", "preview", "jump", "apply", "status", "done")
    steps = drive_client(nvim, tmp_path, VENDORED, "drive_sidekick.lua", want)

    edit = steps["preview"]["edit"]
    assert edit["text"] == "width", edit
    assert edit["range"]["start"] == {"line": 1, "character": 11}, edit
    assert edit["command"]["command"] == "dllm.nextEditAccepted", edit
    assert steps["preview"]["preview"] == {"sign_row": 1, "text": "width"}, steps["preview"]
    assert steps["jump"]["cursor"] == [2, 11], steps["jump"]  # jumped to the edit's start
    assert steps["jump"]["lines"] == steps["preview"]["lines"]  # nothing applied yet
    apply = steps["apply"]
    assert apply["lines"] == ["def area(width, h):", "    return width * h"], apply
    kinds = steps["status"]["next_edits"]["kinds"]
    assert kinds["rename"] == {"suggested": 1, "shown": 1, "accepted": 1}, kinds
