"""`GET /metrics` over a real port with the real builtin engine, read back with prometheus_client's
own text parser: every family the service has always served, with its type and labels, and
counts that follow the requests answered; each service keeps its metrics in its own registry,
so two services in one process count apart."""

from __future__ import annotations

from typing import Any

import builtin_engine
import httpx
import prometheus_client
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from infill_engine import Engine
from infill_engine.scheduler import Scheduler
from infill_engine.service import Service, ServiceThread, parse_address

TOKEN = "metrics-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DOC = "def add(a, b):\n    return \n"
FILL = {"text": DOC, "offset": DOC.index("return ") + len("return "), "params": {"span": 4}}

# name -> type: what /metrics has served since the HTTP front came (dashboards read these)
FAMILIES = {
    "dllm_queue_depth": "gauge",
    "dllm_running_rows": "gauge",
    "dllm_mean_batch": "gauge",
    "dllm_cache_bytes": "gauge",
    **{
        f"dllm_scheduler_{key}": "counter"
        for key in ("submitted", "done", "cancelled", "expired", "busy", "failed", "steps")
    },
    "dllm_forward_passes": "counter",
    "dllm_tokens": "counter",
    "dllm_requests": "counter",
    "dllm_request_seconds": "histogram",
    "dllm_tokens_per_pass": "histogram",
}


engine = builtin_engine.engine  # the module's engine fixture (builtin_engine.py)


def _families(client: httpx.Client) -> dict[str, Any]:
    r = client.get("/metrics", headers=AUTH)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def _value(family: Any, name: str, **labels: str) -> float:
    (value,) = [s.value for s in family.samples if s.name == name and s.labels == labels]
    return float(value)


def test_metrics_parse_with_prometheus_clients_own_parser(engine: Engine) -> None:
    service = Service(engine, "builtin", TOKEN, scheduler=Scheduler(engine.live_batch, max_batch=4))
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        with httpx.Client(base_url=f"http://127.0.0.1:{http.bound.port}", timeout=60) as client:
            for _ in range(2):
                assert client.post("/v2/infill", headers=AUTH, json=FILL).status_code == 200
            assert client.post("/v2/infill", json=FILL).status_code == 401
            families = _families(client)
    for name, kind in FAMILIES.items():
        assert families[name].type == kind, name
    service_counters = {n for n in families if n.startswith("dllm_service_")}
    assert "dllm_service_connections" in service_counters
    assert all(families[n].type == "counter" for n in service_counters)

    requests = families["dllm_requests"]
    assert _value(requests, "dllm_requests_total", front="http", route="v2/infill", code="ok") == 2
    unauthorized = {"front": "http", "route": "v2/infill", "code": "unauthorized"}
    assert _value(requests, "dllm_requests_total", **unauthorized) == 1

    latency = families["dllm_request_seconds"]
    route = {"front": "http", "route": "v2/infill"}
    buckets = [s for s in latency.samples if s.name.endswith("_bucket") and _route(s) == route]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and buckets[-1].labels["le"] == "+Inf" and counts[-1] == 3
    assert _value(latency, "dllm_request_seconds_count", **route) == 3
    assert _value(latency, "dllm_request_seconds_sum", **route) > 0

    written = _value(families["dllm_tokens"], "dllm_tokens_total")
    passes = _value(families["dllm_forward_passes"], "dllm_forward_passes_total")
    assert written >= 2 and passes >= 2  # two fills, at least a token and a pass each
    per_pass = families["dllm_tokens_per_pass"]
    assert _value(per_pass, "dllm_tokens_per_pass_count") == 2  # one observation per row
    assert _value(per_pass, "dllm_tokens_per_pass_sum") > 0
    assert _value(families["dllm_scheduler_done"], "dllm_scheduler_done_total") == 2
    assert _value(families["dllm_queue_depth"], "dllm_queue_depth") == 0


def _route(sample: Sample) -> dict[str, str]:
    return {k: v for k, v in sample.labels.items() if k != "le"}


def test_each_service_counts_in_its_own_registry(engine: Engine) -> None:
    """Two services in one process: neither sees the other's requests, and neither writes into
    prometheus_client's global registry (a second service there would clash on its names)."""
    first = Service(engine, "builtin", TOKEN, scheduler=Scheduler(engine.live_batch, max_batch=2))
    second = Service(engine, "builtin", TOKEN, scheduler=Scheduler(engine.live_batch, max_batch=2))
    assert first.metrics.registry is not second.metrics.registry
    assert prometheus_client.REGISTRY not in (first.metrics.registry, second.metrics.registry)
    with ServiceThread(first, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        with httpx.Client(base_url=f"http://127.0.0.1:{http.bound.port}", timeout=60) as client:
            assert client.post("/v2/infill", headers=AUTH, json=FILL).status_code == 200
    key = ("http", "v2/infill", "ok")
    assert first.metrics.requests[key] == 1 and second.metrics.requests[key] == 0
    labels = {"front": "http", "route": "v2/infill", "code": "ok"}
    assert first.metrics.registry.get_sample_value("dllm_requests_total", labels) == 1
    assert second.metrics.registry.get_sample_value("dllm_requests_total", labels) is None
    assert prometheus_client.REGISTRY.get_sample_value("dllm_requests_total", labels) is None
