"""TCP mode: loopback only unless asked, and nothing is served before initialize carries the
token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import pytest
from test_lsp_frames import read_reply, send

CMD = [sys.executable, "-m", "lsp_server", "--log-level", "ERROR"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def connect(port: int, host: str = "127.0.0.1") -> socket.socket:
    deadline = time.monotonic() + 60
    while True:
        try:
            return socket.create_connection((host, port), timeout=30)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def initialize(port: int, options: dict[str, Any], host: str = "127.0.0.1") -> dict[str, Any]:
    with connect(port, host) as conn:
        f = conn.makefile("rwb")
        send(f, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"capabilities": {}, "initializationOptions": options}})  # fmt: skip
        return read_reply(f, 1)


def test_a_non_loopback_host_needs_allow_remote() -> None:
    proc = subprocess.run([*CMD, "--tcp", "0.0.0.0:7777"], capture_output=True, timeout=60)
    assert proc.returncode == 2 and b"--allow-remote" in proc.stderr


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*CMD, *args], stderr=subprocess.PIPE, env=None if env is None else {**os.environ, **env}
    )


def frames(*messages: dict[str, Any]) -> bytes:
    out = b""
    for m in messages:
        body = json.dumps(m).encode()
        out += b"Content-Length: %d\r\n\r\n" % len(body) + body
    return out


def everything_until_closed(conn: socket.socket) -> bytes:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}


def with_token(token: object) -> dict[str, Any]:
    return {**INIT, "params": {"capabilities": {}, "initializationOptions": {"token": token}}}


def test_pipelined_requests_behind_a_refused_initialize_are_never_served() -> None:
    port = free_port()
    proc = start("--tcp", f"127.0.0.1:{port}", "--token", "s3cret")
    try:
        with connect(port) as conn:
            status = {"jsonrpc": "2.0", "id": 2, "method": "dllm/status", "params": None}
            inline = {"jsonrpc": "2.0", "id": 3, "method": "textDocument/inlineCompletion",
                      "params": {"textDocument": {"uri": "file:///a.py"},
                                 "position": {"line": 0, "character": 0},
                                 "context": {"triggerKind": 1}}}  # fmt: skip
            conn.sendall(frames(with_token("wrong"), status, inline))
            data = everything_until_closed(conn)  # the server closes this connection
        replies = [json.loads(b) for b in data.split(b"\r\n\r\n")[1:]]
        assert len(replies) == 1 and replies[0]["id"] == 1
        error = replies[0]["error"]
        assert "token" in error["message"] and "data" not in error  # no traceback
        assert b"settings" not in data and b"model_calls" not in data
        # the server goes on listening, and serves a client with the token
        assert proc.poll() is None
        assert "capabilities" in initialize(port, {"token": "s3cret"})["result"]
    finally:
        proc.kill()


@pytest.mark.parametrize(
    "first",
    [
        {"jsonrpc": "2.0", "id": 7, "method": "dllm/status", "params": None},  # no initialize
        INIT,  # no token at all
        with_token(None),
        with_token(["s3cret"]),
    ],
)
def test_anything_but_initialize_with_the_token_is_refused(first: dict[str, Any]) -> None:
    port = free_port()
    proc = start("--tcp", f"127.0.0.1:{port}", "--token", "s3cret")
    try:
        with connect(port) as conn:
            conn.sendall(frames(first))
            data = everything_until_closed(conn)
        reply = json.loads(data.split(b"\r\n\r\n", 1)[1])
        assert reply["id"] == first["id"] and reply["error"]["code"] == -32600
        assert proc.poll() is None
    finally:
        proc.kill()


def test_the_token_can_come_from_the_environment() -> None:
    port = free_port()
    proc = start("--tcp", f"127.0.0.1:{port}", env={"DLLM_LS_TOKEN": "from-env"})
    try:
        assert "error" in initialize(port, {"token": "wrong"})
        assert "capabilities" in initialize(port, {"token": "from-env"})["result"]
    finally:
        proc.kill()


def test_a_generated_token_is_printed_on_stderr() -> None:
    port = free_port()
    proc = start("--tcp", f"127.0.0.1:{port}", env={"DLLM_LS_TOKEN": ""})
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert line.startswith("dllm-infill-ls: token ")
        token = line.split()[-1]
        assert len(token) >= 16
        assert "capabilities" in initialize(port, {"token": token})["result"]
    finally:
        proc.kill()


@pytest.mark.parametrize(
    ("listen", "connect_host"),
    [("localhost", "127.0.0.1"), ("[::1]", "::1"), ("", "127.0.0.1")],
)
def test_loopback_hosts_need_no_allow_remote(listen: str, connect_host: str) -> None:
    if connect_host == "::1" and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    port = free_port()
    proc = start("--tcp", f"{listen}:{port}", "--token", "t0ken")
    try:
        assert "capabilities" in initialize(port, {"token": "t0ken"}, host=connect_host)["result"]
    finally:
        proc.kill()


def test_allow_remote_binds_a_non_loopback_host() -> None:
    port = free_port()
    proc = start("--tcp", f"0.0.0.0:{port}", "--allow-remote", "--token", "t0ken")
    try:
        assert "error" in initialize(port, {"token": "nope"})  # the token still applies
        assert "capabilities" in initialize(port, {"token": "t0ken"})["result"]
    finally:
        proc.kill()
