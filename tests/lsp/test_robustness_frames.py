"""Broken framing over stdio: whatever bytes arrive, the server resynchronises at the next valid
header and answers the next well-formed request, with bounded memory (issue 12).

One server process serves a module; a case that kills it fails, and the next case gets a fresh
one. Every case ends with a probe request that must be answered within PROBE_SECONDS, and the
server's RSS must not grow by RSS_SLACK_MIB across the case.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsp_client import SERVER, take_frame

PROBE_SECONDS = 20.0
RSS_SLACK_MIB = 50
_ids = itertools.count(1000)


def body(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def frame(data: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(data), data)


def status_request(msg_id: int) -> bytes:
    return body({"jsonrpc": "2.0", "id": msg_id, "method": "dllm/status", "params": None})


class Stdio:
    """The real server over a raw pipe: bytes in, frames out, each read with a deadline."""

    def __init__(self, stderr: Path) -> None:
        self.stderr_path = stderr
        self.proc = subprocess.Popen(
            [*SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr.open("ab"),
        )
        self.buf = b""
        self.healthy = True  # the last case left it answering
        self.stray: list[dict[str, Any]] = []  # replies that were not waited for
        self.write(frame(body({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"capabilities": {}}})))  # fmt: skip
        assert "capabilities" in self.reply(1, 120.0)["result"]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _message(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            message, self.buf = take_frame(self.buf)
            if message is not None:
                return message
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk

    def reply(self, msg_id: int, timeout: float = PROBE_SECONDS) -> dict[str, Any]:
        """The reply to msg_id; fails when the server dies or stays silent."""
        while True:
            message = self._message(timeout)
            assert message is not None, f"no reply to request {msg_id} (alive: {self.alive()})"
            if message.get("id") == msg_id and "method" not in message:
                return message
            self.stray.append(message)

    def probe(self) -> None:
        msg_id = next(_ids)
        self.write(frame(status_request(msg_id)))
        assert "state" in self.reply(msg_id)["result"]

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Stdio]]:
    box: list[Stdio] = []
    yield box
    for s in box:
        s.close()


@pytest.fixture
def server(servers: list[Stdio], tmp_path_factory: pytest.TempPathFactory) -> Stdio:
    """The module's server, restarted when an earlier case killed or deafened it."""
    if not servers or not servers[-1].alive() or not servers[-1].healthy:
        servers.append(Stdio(tmp_path_factory.mktemp("stdio") / "stderr.txt"))
    server = servers[-1]
    server.stray.clear()
    server.healthy = False  # until the case's last probe is answered
    return server


def survives(server: Stdio, junk: bytes) -> None:
    """Send junk, then a probe: the probe is answered and memory stays bounded."""
    before = server.rss_mib()
    server.write(junk)
    server.probe()
    assert server.alive()
    assert server.rss_mib() - before < RSS_SLACK_MIB
    server.healthy = True


VICTIM = status_request(7)  # a request inside broken framing: answered or not, never fatal
CASES = {
    "huge-length": b"Content-Length: 100000000000\r\n\r\n",
    "overflow-length": b"Content-Length: 18446744073709551616\r\n\r\n",
    "non-numeric": b"Content-Length: abc\r\n\r\n" + VICTIM,
    "lowercase": b"content-length: %d\r\n\r\n" % len(VICTIM) + VICTIM,
    "negative": b"Content-Length: -5\r\n\r\n" + VICTIM,
    "plus-sign": b"Content-Length: +%d\r\n\r\n" % len(VICTIM) + VICTIM,
    "zero": b"Content-Length: 0\r\n\r\n" + VICTIM,
    "too-small": b"Content-Length: 10\r\n\r\n" + VICTIM,
    "too-large": b"Content-Length: %d\r\n\r\n" % (len(VICTIM) + 40) + VICTIM,
    "lf-only": b"Content-Length: %d\n\n" % len(VICTIM) + VICTIM,
    "truncated-body": b"Content-Length: %d\r\n\r\n" % len(VICTIM) + VICTIM[:20],
    "no-header": VICTIM,
    "no-blank-line": b"Content-Length: %d\r\n" % len(VICTIM) + VICTIM,
    "unknown-header-only": b"Hello: world\r\n\r\n",
    "long-junk-line": b"x" * 200_000,
    "binary": bytes(range(256)) * 4,
    "deep-nesting": frame(b"[" * 100_000),
}


@pytest.mark.parametrize("junk", CASES.values(), ids=CASES.keys())
def test_bad_framing_is_skipped_and_the_next_request_is_answered(
    server: Stdio, junk: bytes
) -> None:
    survives(server, junk)


def test_an_oversized_frame_is_discarded_unbuffered_and_logged(server: Stdio) -> None:
    size = 80 << 20  # over the 64 MiB cap: streamed through, never held
    before = server.rss_mib()
    server.write(b"Content-Length: %d\r\n\r\n" % size)
    chunk = b"x" * (1 << 20)
    for _ in range(size >> 20):
        server.write(chunk)
    server.probe()
    assert server.rss_mib() - before < RSS_SLACK_MIB
    assert "exceeds" in server.stderr() and "64 MiB" in server.stderr()
    survives(server, b"")


def test_invalid_json_gets_a_parse_error_and_the_server_keeps_serving(server: Stdio) -> None:
    server.write(frame(b"{this is not json"))
    survives(server, b"")
    errors = [m for m in server.stray if "error" in m]
    assert errors and errors[0]["id"] is None and errors[0]["error"]["code"] == -32700
    assert "Traceback" not in json.dumps(errors)


def test_a_request_with_invalid_params_gets_an_error_reply(server: Stdio) -> None:
    server.write(frame(body({"jsonrpc": "2.0", "id": 8, "method": "textDocument/hover"})))
    assert server.reply(8)["error"]["code"] == -32602
    survives(server, b"")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(junk=st.binary(max_size=400))
def test_random_junk_between_frames_never_deafens_the_server(server: Stdio, junk: bytes) -> None:
    survives(server, junk)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=st.text(max_size=24))
def test_random_content_length_values_never_deafen_the_server(server: Stdio, value: str) -> None:
    survives(server, b"Content-Length: " + value.encode() + b"\r\n\r\n" + VICTIM)
