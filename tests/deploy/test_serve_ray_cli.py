"""`dllm-infill serve --ray`: one command starts a local Ray cluster, Serve's proxy on the
`--listen` address and the replicas; SIGTERM takes it all down. And its refusals, which come
before anything starts. Needs the ray extra for the first test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from infill_engine.lab.bench_ray import free_port

CLI = [sys.executable, "-m", "infill_engine.cli", "serve", "--ray"]


@pytest.mark.ray
@pytest.mark.slow
def test_serve_ray_starts_replicas_behind_the_listen_address_and_stops_on_sigterm() -> None:
    pytest.importorskip("ray.serve")
    port = free_port()
    env = {**os.environ, "DLLM_SERVE_TOKEN": "cli-token"}
    listen = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [*CLI, "--replicas", "1", "--listen", listen, "--log-level", "WARNING"],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 180
        for line in proc.stderr:
            if "listening on" in line:
                assert "Ray Serve" in line
                break
            assert time.monotonic() < deadline, "serve --ray did not start"
        health = httpx.get(f"{listen}/health", timeout=30)
        assert health.status_code == 200 and health.json()["model"] == "builtin"
        models = httpx.get(f"{listen}/v1/models", timeout=30,
                           headers={"Authorization": "Bearer cli-token"})  # fmt: skip
        assert models.json()["data"][0]["max_positions"] > 0
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    assert rc == 0
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
