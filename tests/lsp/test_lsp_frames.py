"""Malformed JSON-RPC frames: the server answers what it can and keeps serving."""

from __future__ import annotations

import json
import subprocess
from typing import IO, Any

from lsp_client import SERVER


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def send(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write(frame(json.dumps(message).encode()))
    stdin.flush()


def read_message(stdout: IO[bytes]) -> dict[str, Any]:
    length = 0
    while (line := stdout.readline().strip()) != b"":
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return dict(json.loads(stdout.read(length)))


def read_reply(stdout: IO[bytes], msg_id: int) -> dict[str, Any]:
    while True:
        msg = read_message(stdout)
        if msg.get("id") == msg_id and "method" not in msg:
            return msg


def test_garbage_frames_do_not_stop_the_server() -> None:
    proc = subprocess.Popen(
        [*SERVER, "--log-level", "ERROR"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(frame(b"{this is not json"))
        proc.stdin.write(frame(b'{"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover"}'))
        proc.stdin.write(frame(b'["a", "list"]'))
        proc.stdin.flush()
        send(proc.stdin, {"jsonrpc": "2.0", "id": 2, "method": "initialize",
                          "params": {"capabilities": {}, "initializationOptions": {}}})  # fmt: skip
        reply = read_reply(proc.stdout, 2)
        assert "capabilities" in reply["result"]
        send(proc.stdin, {"jsonrpc": "2.0", "id": 3, "method": "dllm/status", "params": None})
        assert read_reply(proc.stdout, 3)["result"]["encoding"] == "utf-16"
        send(proc.stdin, {"jsonrpc": "2.0", "id": 4, "method": "shutdown"})
        read_reply(proc.stdout, 4)
        send(proc.stdin, {"jsonrpc": "2.0", "method": "exit"})
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
