"""A Mercury-shaped completion API (tests/lsp/fim_standin.py) on loopback serves inline
completions in VS Code (code-server, driven by headless chromium: code_server.py and
drive_vscode.js's fim scenario) through the extension and the real language server
(`dllm.engineAddress: "openai+URL"`, the key in the environment): the stand-in's model writes
the line and more, our finish cuts it to the line, and Tab inserts exactly that. Off unless
DLLM_EDITOR_TESTS=1, like test_vscode.py, whose code-server install it shares."""

from __future__ import annotations

from pathlib import Path

from code_server import SERVER, SKIPS, drive
from lsp.fim_standin import KEY, MODEL, Standin, running

pytestmark = SKIPS

TEXT = "def add(a, b):\n    return\n\n\nprint(add(1, 2))\n"
ANSWER = "a + b\n\n\ndef extra():\n    pass\n"  # more than the hole wants


def test_vscode_completes_through_a_mercury_shaped_api(tmp_path: Path) -> None:
    source = tmp_path / "add.py"
    source.write_text(TEXT)
    with running(Standin(ANSWER)) as standin:
        settings = {
            "dllm.serverPath": str(SERVER),
            "dllm.engineAddress": "openai+" + standin.base,
            "dllm.engineApiKeyEnv": "DLLM_API_KEY",
        }
        run = drive(tmp_path / "vscode", source, settings, "fim", env={"DLLM_API_KEY": KEY})
        sent = standin.completions()
    run.check(["browser", "workbench", "open", "status_item", "ready", "ghost", "accept"])
    steps = run.by_step
    assert steps["ghost"]["text"] == "a + b", run.report  # the stand-in's line, cut by our finish
    assert steps["accept"]["line2"] == "    return a + b", run.report
    assert steps["accept"]["text"] == TEXT.replace("return\n", "return a + b\n", 1)
    assert sent and all(s.path == "/v1/fim/completions" for s in sent), sent
    assert all(s.auth == f"Bearer {KEY}" and s.body["model"] == MODEL for s in sent)
    assert sent[0].body["prompt"].endswith("    return ") and sent[0].body["stream"] is True
    assert KEY not in run.report  # the key is never logged or shown
