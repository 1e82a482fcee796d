"""The engine's replicas on a real local Ray Serve cluster (infill_engine/deploy) with the
builtin model, on this machine's CPUs: the HTTP API through Serve's proxy, the language server
pointed at it, a replica killed under load, a wedged replica replaced by its health check, and a
client that hangs up freeing its rows inside the replica. The scenarios are bench-ray's
(lab/dllm_lab/bench_ray.py), at a smaller load; the faults are lab/faults.py's.

Needs the ray extra (`make ray-test` installs it and runs them); `make test` deselects them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from lsp_client import GREET, StdioPeer, init_params
from pygls.protocol import default_converter

from dllm_lab import bench_ray
from dllm_lab.bench_ray import Cluster, replica_ids

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TOKEN = "ray-token"
PARAMS = {"span": 16, "min_tokens": 1}
CLIENTS = 4


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    pytest.importorskip("ray.serve")  # here, not at import: `make test` deselects, not skips
    c = Cluster(bench_ray.free_port(), TOKEN)
    try:
        yield c
    finally:
        c.close()


def test_two_replicas_answer_the_http_api_through_the_proxy(cluster: Cluster) -> None:
    cluster.deploy(2)
    assert len(replica_ids()) == 2 and cluster.running() == 2
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=cluster.url, timeout=60) as http:
        health = http.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert http.post("/v2/infill", json=bench_ray.ask(0, PARAMS)).status_code == 401
        native = http.post("/v2/infill", json=bench_ray.ask(0, PARAMS), headers=auth).json()
        assert native["items"][0]["tokens"] >= 1 and native["plan"]["span"] >= 1
        llama = {"input_prefix": "def add(a, b):\n    return ", "input_suffix": "\n"}
        assert "content" in http.post("/infill", json=llama, headers=auth).json()
        openai = {"prompt": "x = [1, 2]\ntotal = ", "suffix": "\n", "max_tokens": 8, "n": 2}
        assert len(http.post("/v1/completions", json=openai, headers=auth).json()["choices"]) == 2
        refine = {"prefix": "def add(a, b):\n    return ", "text": "a + b", "suffix": "\n"}
        assert http.post("/v2/refine", json=refine, headers=auth).json()["nfe"] >= 1
    load = bench_ray.run_load(cluster.url, TOKEN, 8, PARAMS, requests=2).summary()
    assert load["ok"] == 16 and load["errors"] == load["hung"] == 0


def test_the_language_server_points_at_the_ray_ingress_by_its_address(cluster: Cluster) -> None:
    cluster.deploy(1)
    server = StdioPeer()
    try:
        settings = {"engineAddress": cluster.url, "engineToken": TOKEN, "candidates": 1,
                    "decode": {"maxSpan": 16}, "model": "/nonexistent/model"}  # fmt: skip
        params = default_converter().unstructure(init_params(settings=settings))
        assert "result" in server.reply(server.ask("initialize", params), timeout=60)
        server.notify("initialized", {})
        status = server.wait_loaded()
        assert status["state"] == "ready", status
        assert status["service_model"] == "builtin" and status["torch_loaded"] is False
        uri = "file:///work/ray.py"
        server.open(uri, GREET)
        ask = {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 4},
               "context": {"triggerKind": 1}}  # fmt: skip
        reply = server.reply(server.ask("textDocument/inlineCompletion", ask), timeout=60)
        assert reply["result"]["items"], reply
    finally:
        server.kill()


def test_a_killed_replica_loses_no_request_and_comes_back(cluster: Cluster) -> None:
    """Its actor is killed under load: every request is answered, some after the client's
    retry; none hangs; Serve starts a new replica."""
    out: dict[str, Any] = bench_ray.kill(cluster, CLIENTS, PARAMS)
    assert out["ok"] == out["requests"] > 0, out
    assert out["errors"] == 0 and out["hung"] == 0, out
    assert out["recovered_s"] < 60, out


def test_a_wedged_replica_is_taken_out_by_its_health_check(cluster: Cluster) -> None:
    """A step that never returns: the replica's health check fails after wedged_s, Serve
    replaces it, and the requests that were inside it are retried on the other."""
    out: dict[str, Any] = bench_ray.wedge(cluster, CLIENTS, PARAMS, wedged_s=2.0)
    assert out["recovered_s"] > 2.0, out  # not before the bound
    assert out["ok"] == out["requests"] > 0, out
    assert out["errors"] == 0 and out["hung"] == 0, out


def test_a_client_that_hangs_up_frees_its_rows_in_the_replica(cluster: Cluster) -> None:
    out: dict[str, Any] = bench_ray.cancel(cluster)
    assert out["cancelled"] == 1 and out["disconnect_cancels"] == 1, out
    assert out["done"] == 0, out  # it never ran to its end
    assert out["steps_run"] < out["steps_asked"], out
