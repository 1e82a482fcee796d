"""TCP mode: loopback only unless asked, and initialize must carry the token."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from typing import Any

from test_lsp_frames import read_reply, send

CMD = [sys.executable, "-m", "lsp_server", "--log-level", "ERROR"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def connect(port: int) -> socket.socket:
    deadline = time.monotonic() + 60
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def initialize(port: int, options: dict[str, Any]) -> dict[str, Any]:
    with connect(port) as conn:
        f = conn.makefile("rwb")
        send(f, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"capabilities": {}, "initializationOptions": options}})  # fmt: skip
        return read_reply(f, 1)


def test_a_non_loopback_host_needs_allow_remote() -> None:
    proc = subprocess.run([*CMD, "--tcp", "0.0.0.0:7777"], capture_output=True, timeout=60)
    assert proc.returncode == 2 and b"--allow-remote" in proc.stderr


def test_initialize_without_the_token_is_refused() -> None:
    port = free_port()
    proc = subprocess.Popen([*CMD, "--tcp", f"127.0.0.1:{port}", "--token", "s3cret"])
    try:
        reply = initialize(port, {"token": "wrong"})
        assert "error" in reply and "token" in reply["error"]["message"]
        assert proc.wait(timeout=30) is not None  # and the server stops
    finally:
        proc.kill()


def test_initialize_with_the_token_is_served() -> None:
    port = free_port()
    proc = subprocess.Popen([*CMD, "--tcp", f"127.0.0.1:{port}", "--token", "s3cret"])
    try:
        reply = initialize(port, {"token": "s3cret"})
        assert "capabilities" in reply["result"]
    finally:
        proc.kill()
