"""`dllm-infill serve --ray`: one command starts a local Ray cluster, Serve's proxy on the
`--listen` address and the replicas; SIGTERM takes it all down. And its refusals, which come
before anything starts. Needs the ray extra for the first test, and Linux's /proc to find what
is left of the process tree."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from dllm_lab.bench_ray import free_port

CLI = [sys.executable, "-m", "infill_engine.cli", "serve", "--ray"]


def processes() -> dict[int, tuple[int, str]]:
    """Every running process as pid -> (session, start time), from /proc (Linux)."""
    out = {}
    for entry in Path("/proc").iterdir():
        try:
            text = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if fields and fields[0] not in ("Z", "X"):  # an exited one waiting to be reaped is gone
            out[int(entry.name)] = (int(fields[3]), fields[19])
    return out


def session(sid: int) -> dict[int, str]:
    """The running processes of session `sid`, as pid -> start time."""
    return {pid: start for pid, (s, start) in processes().items() if s == sid}


def still_running(noted: dict[int, str], sid: int, within_s: float) -> list[int]:
    """The processes of session `sid`, and those noted while serving (should one have left the
    session), still running after `within_s`; a pid counts only with the start time it had."""
    deadline = time.monotonic() + within_s
    while True:
        now = processes()
        left = [p for p, (s, start) in now.items() if s == sid or noted.get(p) == start]
        if not left or time.monotonic() > deadline:
            return sorted(left)
        time.sleep(0.1)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("to", ["group", "process"])
def test_serve_ray_starts_replicas_behind_the_listen_address_and_stops_on_sigterm(to: str) -> None:
    """SIGTERM to the whole process group (a terminal's Ctrl-C, a container stop: Ray's own
    processes get it too) or to the process alone: it exits within 10 s, status 0, and no
    process it started, Ray's included, is left."""
    pytest.importorskip("ray.serve")
    port = free_port()
    env = {**os.environ, "DLLM_SERVE_TOKEN": "cli-token"}
    listen = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [*CLI, "--replicas", "1", "--listen", listen, "--log-level", "WARNING"],
        env=env, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    sid = proc.pid  # its own session and process group, as a terminal gives a command
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 180
        for line in proc.stderr:
            if "listening on" in line:
                assert "Ray Serve" in line
                break
            assert time.monotonic() < deadline, "serve --ray did not start"
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
        health = httpx.get(f"{listen}/health", timeout=30)
        assert health.status_code == 200 and health.json()["model"] == "builtin"
        models = httpx.get(f"{listen}/v1/models", timeout=30,
                           headers={"Authorization": "Bearer cli-token"})  # fmt: skip
        assert models.json()["data"][0]["max_positions"] > 0
        noted = session(sid)
        assert len(noted) > 3, noted  # the CLI, Ray's GCS and raylet, the replica, ...

        started = time.monotonic()
        if to == "group":
            os.killpg(sid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            rc: int | None = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - started
        left = still_running(noted, sid, within_s=1.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sid, signal.SIGKILL)  # only what this test started: its own session
        proc.wait(timeout=30)
    assert rc is not None and took < 10, f"serve --ray ran {took:.1f} s after SIGTERM to the {to}"
    assert rc == 0
    assert not left, f"left running after serve --ray exited: {left}"
    with pytest.raises(httpx.TransportError):  # the proxy went with it
        httpx.get(f"{listen}/health", timeout=5)


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--listen", "tcp:127.0.0.1:9"], {"DLLM_SERVE_TOKEN": "t"}, "--ray serves HTTP"),
        (["--listen", "http://127.0.0.1:9"], {}, "token"),
        (["--listen", "http://0.0.0.0:9"], {"DLLM_SERVE_TOKEN": "t"}, "allow-remote"),
        (["--listen", "http://127.0.0.1:9", "--autoscale", "x"], {"DLLM_SERVE_TOKEN": "t"},
         "--autoscale MIN:MAX"),
        (["--listen", "http://127.0.0.1:9", "--replicas", "0"], {"DLLM_SERVE_TOKEN": "t"},
         "replicas must be >= 1"),
    ],
)  # fmt: skip
def test_serve_ray_refuses_bad_settings_before_starting(
    args: list[str], env: dict[str, str], says: str
) -> None:
    base = {k: v for k, v in os.environ.items() if k != "DLLM_SERVE_TOKEN"}
    done = subprocess.run([*CLI, *args], env={**base, **env}, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert says in done.stderr, done.stderr
