"""The VS Code extension (vscode-client) in code-server (VS Code 1.100 in a browser), driven by
headless chromium: what the VS Code editor tests share.

setup_vscode.sh installs code-server and puppeteer-core into build/ and packages the .vsix (the
Makefile's editor-test target runs it first). `drive` installs the .vsix into a throwaway
extensions folder, starts code-server on 127.0.0.1 with a free port on a workspace holding one
file, and runs a driver (drive_vscode.js unless told) with a scenario (DLLM_SCENARIO), which
does the editing and writes one JSON line per step; the caller checks the steps. The tests are
off unless DLLM_EDITOR_TESTS=1 (`make editor-test`); DLLM_VSCODE_TESTS=0 skips them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SKIPS = [
    pytest.mark.skipif(
        os.environ.get("DLLM_EDITOR_TESTS") != "1",
        reason="editor tests run with DLLM_EDITOR_TESTS=1 (make editor-test)",
    ),
    pytest.mark.skipif(
        os.environ.get("DLLM_VSCODE_TESTS") == "0",
        reason="DLLM_VSCODE_TESTS=0: the VS Code tests are switched off",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SERVER = Path(sys.executable).parent / "dllm-infill-ls"
BUILD = Path(os.environ.get("DLLM_VSCODE_BUILD", ROOT / "build"))
CODE_SERVER = BUILD / "code-server" / "node_modules" / ".bin" / "code-server"
NODE_MODULES = BUILD / "vscode-e2e" / "node_modules"
SCREENS = BUILD / "editor-screens"
CHROMIUM = os.environ.get("DLLM_CHROMIUM", "/usr/bin/chromium")
CLIENT = ROOT / "vscode-client"

# The editor's own settings for every scenario; the dllm.* ones are the caller's.
EDITOR_SETTINGS: dict[str, Any] = {
    # No word-based suggest widget: Tab goes to the inline suggestion.
    "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
    "editor.suggestOnTriggerCharacters": False,
    # Ghost text in its own gray, so that the screenshot tells it from the text.
    "editor.inlineSuggest.syntaxHighlightingEnabled": False,
    "security.workspace.trust.enabled": False,
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "update.mode": "none",
    "git.enabled": False,
}


def vsix() -> Path:
    version = json.loads((CLIENT / "package.json").read_text())["version"]
    return CLIENT / f"dllm-infill-{version}.vsix"


def versions() -> str:
    """code-server's version and that of the VS Code inside it."""
    package = CODE_SERVER.parents[1] / "code-server"
    own = json.loads((package / "package.json").read_text())["version"]
    code = json.loads((package / "lib" / "vscode" / "package.json").read_text())["version"]
    return f"{own} (VS Code {code})"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def descendants(pid: int) -> list[int]:
    """Every process below pid (from /proc), deepest last."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """Stops pid and everything it started (extension host, language server, chromium's
    helpers): SIGTERM, then SIGKILL for what is left after 5 s."""
    pids = [pid, *descendants(pid)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.1)
        pids = [p for p in pids if Path(f"/proc/{p}").exists()]
        if not pids:
            return


def wait_for_http(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"code-server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"code-server did not answer on {url} in {timeout} s")


def tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else f"({path} missing)"


def logs(user_data: Path) -> str:
    """The extension's output channel and the extension host's log, for failure messages."""
    parts = []
    for pattern in ("**/dLLM Infill.log", "**/remoteexthost.log"):
        for path in sorted(user_data.glob(f"logs/{pattern}")):
            parts.append(f"--- {path.relative_to(user_data)}\n{tail(path)}")
    return "\n".join(parts)


@dataclass
class Drive:
    steps: list[dict[str, Any]]
    report: str  # the steps, the driver's output and the logs, for failure messages
    install_s: float  # the .vsix's install

    @property
    def by_step(self) -> dict[str, dict[str, Any]]:
        return {s["step"]: s for s in self.steps}

    def check(self, expected: list[str]) -> None:
        """No step failed and each of `expected` was reached."""
        failed = [s for s in self.steps if not s.get("ok")]
        assert not failed, f"{failed}\n{self.report}"
        missing = [name for name in expected if name not in self.by_step]
        assert not missing, f"steps not reached: {missing}\n{self.report}"


def drive(
    tmp_path: Path,
    source: Path,
    settings: dict[str, Any],
    scenario: str,
    env: dict[str, str] | None = None,
    driver: str = "drive_vscode.js",
) -> Drive:
    """Runs the `scenario` of `driver` (a script here) on a copy of `source` in a fresh
    code-server with the extension installed and `settings` (the dllm.* ones) beside
    EDITOR_SETTINGS; `env` goes to code-server (and so to the language server)."""
    package = vsix()
    needed = [CODE_SERVER, NODE_MODULES / "puppeteer-core", package, Path(CHROMIUM)]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        # asked for (DLLM_EDITOR_TESTS=1), so a missing set-up fails; DLLM_VSCODE_TESTS=0 skips
        pytest.fail(f"run tests/editors/setup_vscode.sh (make editor-test does); missing {missing}")
    assert SERVER.exists(), f"{SERVER} is missing: run make setup"

    user_data, extensions, workspace = tmp_path / "user", tmp_path / "ext", tmp_path / "ws"
    for d in (user_data / "User", extensions, workspace, tmp_path / "xdg"):
        d.mkdir(parents=True)
    file = workspace / source.name
    file.write_bytes(source.read_bytes())
    settings_file = user_data / "User" / "settings.json"
    settings_file.write_text(json.dumps({**settings, **EDITOR_SETTINGS}, indent=2))
    config = tmp_path / "code-server.yaml"
    config.write_text("bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n")
    cs_args = [
        str(CODE_SERVER),
        "--config",
        str(config),
        "--user-data-dir",
        str(user_data),
        "--extensions-dir",
        str(extensions),
    ]
    cs_env = {
        **os.environ,
        **(env or {}),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    started = time.monotonic()
    proc = subprocess.run(
        [*cs_args, "--install-extension", str(package)],
        env=cs_env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    install_s = time.monotonic() - started
    assert proc.returncode == 0 and "successfully installed" in proc.stdout, (
        proc.stdout + proc.stderr
    )

    port = free_port()
    result = tmp_path / "result.jsonl"
    SCREENS.mkdir(parents=True, exist_ok=True)
    # the full scenario's screenshots are vscode-*.png, another's vscode-SCENARIO-*.png
    for old in SCREENS.glob("vscode-*.png" if scenario == "full" else f"vscode-{scenario}-*.png"):
        old.unlink()
    server_log = tmp_path / "code-server.log"
    t0 = time.time()
    with server_log.open("wb") as out:
        code_server = subprocess.Popen(
            [
                *cs_args,
                "--bind-addr",
                f"127.0.0.1:{port}",
                "--auth",
                "none",
                "--disable-telemetry",
                "--disable-update-check",
                "--disable-workspace-trust",
                "--disable-getting-started-override",
                # the show and partial-accept reports (reports.js) use an API proposal
                "--enable-proposed-api",
                "dllm-infill.dllm-infill",
                "--ignore-last-opened",
                str(workspace),
            ],
            env=cs_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    script = HERE / driver
    assert script.is_file(), f"no driver {script}"
    proc_driver: subprocess.Popen[str] | None = None
    output = ""
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", code_server, 60)
        driver_env = {
            **cs_env,
            "NODE_PATH": str(NODE_MODULES),
            "DLLM_URL": f"http://127.0.0.1:{port}/?folder={workspace}",
            "DLLM_FILE": str(file),
            "DLLM_SCENARIO": scenario,
            "DLLM_SETTINGS": str(settings_file),
            "DLLM_RESULT": str(result),
            "DLLM_SCREENS": str(SCREENS),
            "DLLM_PROFILE": str(tmp_path / "chromium"),
            "DLLM_T0": repr(t0),
            "DLLM_CHROMIUM": CHROMIUM,
        }
        proc_driver = subprocess.Popen(
            ["node", str(script)],
            env=driver_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = proc_driver.communicate(timeout=480)
        except subprocess.TimeoutExpired:
            kill_tree(proc_driver.pid)
            output, _ = proc_driver.communicate()
    finally:
        if proc_driver is not None:
            kill_tree(proc_driver.pid)  # chromium, should the driver have left it running
        kill_tree(code_server.pid)

    lines = result.read_text().splitlines() if result.exists() else []
    steps: list[dict[str, Any]] = [json.loads(line) for line in lines]
    report = f"{steps}\n{(output or '')[-2000:]}\n{tail(server_log)}\n{logs(user_data)}"
    return Drive(steps, report, install_s)
