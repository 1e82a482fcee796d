"""TCP mode under faults: a refused, broken or vanished client ends its own connection and nothing
more; the listener goes on serving, each accepted connection has its own session, and no reply
carries a traceback or a file path (issue 12).

One server process serves the module; a test that kills it fails, and the next gets a fresh one.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsp_client import take_frame

TOKEN = "s3cret"
SECONDS = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def frame(message: dict[str, Any]) -> bytes:
    data = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


def init(token: object = TOKEN, msg_id: int = 1) -> bytes:
    options = {} if token is None else {"token": token}
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": "initialize",
                  "params": {"capabilities": {}, "initializationOptions": options}})  # fmt: skip


def status(msg_id: int) -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": "dllm/status", "params": None})


class Client:
    """A raw socket to the server, reading frames with a deadline."""

    def __init__(self, port: int) -> None:
        deadline = time.monotonic() + 120
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=SECONDS)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.buf = b""
        self.raw = b""  # every byte received, to look for leaks

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def message(self) -> dict[str, Any] | None:
        """The next message, or None when the server closed the connection."""
        while True:
            message, self.buf = take_frame(self.buf)
            if message is not None:
                return message
            try:
                chunk = self.sock.recv(1 << 16)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            self.buf += chunk
            self.raw += chunk

    def reply(self, msg_id: int) -> dict[str, Any]:
        while (message := self.message()) is not None:
            if message.get("id") == msg_id and "method" not in message:
                return message
        raise AssertionError(f"the connection closed before the reply to {msg_id}")

    def close(self) -> None:
        self.sock.close()


def authenticated(port: int) -> Client:
    """A client past the token gate; retries while the previous session is being torn down."""
    deadline = time.monotonic() + SECONDS
    while True:
        client = Client(port)
        client.send(init())
        reply = client.reply(1)
        if "result" in reply:
            return client
        client.close()
        assert "another client" in reply["error"]["message"], reply
        assert time.monotonic() < deadline, "the previous session never ended"
        time.sleep(0.1)


def assert_no_leak(data: bytes) -> None:
    assert b"Traceback" not in data and b".py" not in data and b"/work" not in data


class Listener:
    def __init__(self, stderr: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lsp_server", "--log-level", "WARNING",
             "--tcp", f"127.0.0.1:{self.port}", "--token", TOKEN],
            stderr=stderr.open("ab"),
        )  # fmt: skip
        self.healthy = True  # the last test left it serving

    def alive(self) -> bool:
        return self.proc.poll() is None

    def serves(self) -> None:
        """The listener is up, and a new authenticated client is answered."""
        assert self.alive(), f"the server exited with {self.proc.returncode}"
        client = authenticated(self.port)
        try:
            client.send(status(2))
            assert "state" in client.reply(2)["result"]
        finally:
            client.close()
        self.healthy = True


@pytest.fixture(scope="module")
def listeners() -> Iterator[list[Listener]]:
    box: list[Listener] = []
    yield box
    for s in box:
        s.proc.kill()
        s.proc.wait()


@pytest.fixture
def listener(listeners: list[Listener], tmp_path_factory: pytest.TempPathFactory) -> Listener:
    """The module's server, restarted when an earlier test killed or jammed it."""
    if not listeners or not listeners[-1].alive() or not listeners[-1].healthy:
        listeners.append(Listener(tmp_path_factory.mktemp("tcp") / "stderr.txt"))
    listeners[-1].healthy = False  # until the test's last check passes
    return listeners[-1]


FIRST_FRAMES = {
    "wrong-token": init("wrong"),
    "no-token": init(None),
    "lone-surrogate-token": init("\ud800"),
    "not-initialize": status(5),
    "not-json": b"Content-Length: 5\r\n\r\n{oops",
    "huge-length": b"Content-Length: 100000000000\r\n\r\n",
    "overflow-length": b"Content-Length: 18446744073709551616\r\n\r\n",
    "long-junk-line": b"x" * 200_000 + b"\r\n\r\n",
    "binary": bytes(range(256)),
}


@pytest.mark.parametrize("first", FIRST_FRAMES.values(), ids=FIRST_FRAMES.keys())
def test_a_bad_first_frame_refuses_that_connection_alone(listener: Listener, first: bytes) -> None:
    client = Client(listener.port)
    try:
        with contextlib.suppress(OSError):  # the server may have refused and closed already
            client.send(first)
            client.sock.shutdown(socket.SHUT_WR)  # whatever it is, it is all the client sends
        while client.message() is not None:
            pass  # the server answers at most an error, then closes this connection
        assert_no_leak(client.raw)
    finally:
        client.close()
    listener.serves()


def test_a_second_client_cannot_take_over_the_first_clients_replies(listener: Listener) -> None:
    first, second = Client(listener.port), Client(listener.port)  # both connected, neither sent
    try:
        first.send(init())
        assert "result" in first.reply(1)
        second.send(init())
        refusal = second.reply(1)
        assert "another client" in refusal["error"]["message"]
        assert second.message() is None  # and that connection is closed
        first.send(status(2))
        assert "state" in first.reply(2)["result"]
    finally:
        first.close()
        second.close()
    listener.serves()


def test_a_second_client_with_a_bad_token_is_refused_alone(listener: Listener) -> None:
    first = authenticated(listener.port)
    second = Client(listener.port)
    try:
        second.send(init("wrong"))
        assert second.reply(1)["error"]["code"] == -32600
        first.send(status(3))
        assert "state" in first.reply(3)["result"]
        assert_no_leak(second.raw)
    finally:
        first.close()
        second.close()
    listener.serves()


def test_a_client_leaving_mid_request_does_not_stop_the_listener(listener: Listener) -> None:
    client = authenticated(listener.port)
    uri = "file:///tmp/leaving.py"
    client.send(
        frame({"jsonrpc": "2.0", "method": "textDocument/didOpen",
               "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                           "text": "def f(x):\n    \n"}}})
        + frame({"jsonrpc": "2.0", "id": 9, "method": "textDocument/inlineCompletion",
                 "params": {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 4},
                            "context": {"triggerKind": 1}}})
    )  # fmt: skip
    client.close()
    time.sleep(0.5)
    listener.serves()


def test_shutdown_and_exit_end_one_session_not_the_listener(listener: Listener) -> None:
    client = authenticated(listener.port)
    try:
        client.send(frame({"jsonrpc": "2.0", "id": 4, "method": "shutdown"}))
        assert client.reply(4)["result"] is None
        client.send(frame({"jsonrpc": "2.0", "method": "exit"}))
        assert client.message() is None  # exit closes this connection
    finally:
        client.close()
    listener.serves()  # a fresh session: the old one's shutdown does not carry over


SESSION_FAULTS = {
    "huge-length": b"Content-Length: 100000000000\r\n\r\n",
    "non-numeric": b"Content-Length: abc\r\n\r\n{}",
    "too-large": b"Content-Length: 500\r\n\r\n{}",
    "not-json": b"Content-Length: 5\r\n\r\n{oops",
}


@pytest.mark.parametrize("junk", SESSION_FAULTS.values(), ids=SESSION_FAULTS.keys())
def test_bad_framing_inside_a_session_is_skipped(listener: Listener, junk: bytes) -> None:
    client = authenticated(listener.port)
    try:
        client.send(junk + status(6))
        assert "state" in client.reply(6)["result"]
        assert_no_leak(client.raw)
    finally:
        client.close()
    listener.serves()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(junk=st.binary(max_size=300))
def test_random_first_bytes_are_refused_without_leaks(listener: Listener, junk: bytes) -> None:
    client = Client(listener.port)
    try:
        with contextlib.suppress(OSError):
            client.send(junk)
            client.sock.shutdown(socket.SHUT_WR)
        while client.message() is not None:
            pass
        assert_no_leak(client.raw)
    finally:
        client.close()
    listener.serves()
