"""`dllm-infill bench-ray`: the engine's replicas on a local Ray Serve cluster, measured in one
run (docs/deploy.md):

- **scale**: the same clients against 1 replica and against 2 (alternating, `--rounds` times):
  requests/s, tokens/s, p50/p95 latency and the throughput ratio;
- **kill**: a replica's actor is killed under load: how many requests were answered at once,
  after a retry, with an error, or hung, and the time until Serve runs 2 replicas again;
- **wedge**: a replica's step hangs (a planted fault, lab/faults.py) under load: the time until
  its health check fails and it is replaced, and the requests' outcomes;
- **ingress**: what the way in costs: `/health` requests per second and one client's native call
  latency, through Serve's proxy and straight to the HTTP front;
- **cancel**: a client hangs up in the middle of a long fill: the replica's cancelled rows and
  the time until its batch is empty again.

The scenario functions are also what tests/deploy runs, at a smaller load."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from infill_engine.deploy.spec import APPLICATION, DEPLOYMENT, ReplicaSpec, Scaling
from infill_engine.service.front import WEDGED_S
from infill_engine.service.metrics import nearest_rank

from .bench_serve import BENCH_HOLES, native_ask
from .faults import FaultyLoader

RETRIES = 4  # a client retries a request refused with 5xx or a lost connection this often,
RETRY_AFTER_S = 0.1  # after 0.1, 0.2, 0.4, 0.8 s
TIMEOUT_S = 60.0  # a request without an answer by then counts as hung
REPLICA_PREFIX = f"SERVE_REPLICA::{APPLICATION}#{DEPLOYMENT}#"


@dataclass
class Outcome:
    ms: float  # first attempt to final answer
    attempts: int
    status: str  # "ok", "hung", or the final HTTP status / "lost connection"
    tokens: int = 0


@dataclass
class Load:
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        ok = [o for o in self.outcomes if o.status == "ok"]
        ms = sorted(o.ms for o in ok)
        return {
            "requests": len(self.outcomes),
            "ok": len(ok),
            "ok_after_retry": sum(1 for o in ok if o.attempts > 1),
            "errors": sum(1 for o in self.outcomes if o.status not in ("ok", "hung")),
            "hung": sum(1 for o in self.outcomes if o.status == "hung"),
            "req_per_s": round(len(ok) / self.wall_s, 2) if self.wall_s else 0.0,
            "tok_per_s": round(sum(o.tokens for o in ok) / self.wall_s, 1) if self.wall_s else 0,
            "p50_ms": round(nearest_rank(ms, 50) or 0.0, 1),
            "p95_ms": round(nearest_rank(ms, 95) or 0.0, 1),
            "max_ms": round(ms[-1], 1) if ms else 0.0,
        }


def ask(k: int, params: dict[str, Any]) -> dict[str, Any]:
    """The k-th bench hole (bench-serve's, in turn) as a native call."""
    return native_ask(BENCH_HOLES[k % len(BENCH_HOLES)], params)


def one(client: httpx.Client, body: dict[str, Any]) -> Outcome:
    """A native call, retried on 5xx and lost connections as an editor's client would."""
    t0 = time.perf_counter()
    status = "lost connection"
    for attempt in range(1, RETRIES + 2):
        try:
            r = client.post("/v2/infill", json=body)
        except httpx.TimeoutException:
            return Outcome((time.perf_counter() - t0) * 1000, attempt, "hung")
        except httpx.TransportError:
            status = "lost connection"
        else:
            if r.status_code == 200:
                tokens = int(r.json()["items"][0]["tokens"])
                return Outcome((time.perf_counter() - t0) * 1000, attempt, "ok", tokens)
            status = str(r.status_code)
            if r.status_code < 500:
                break
        time.sleep(RETRY_AFTER_S * 2 ** (attempt - 1))
    return Outcome((time.perf_counter() - t0) * 1000, attempt, status)


def run_load(
    url: str,
    token: str,
    clients: int,
    params: dict[str, Any],
    requests: int | None = None,
    until: threading.Event | None = None,
) -> Load:
    """`clients` threads, each sending one request after another: `requests` each, or until
    `until` is set."""
    load = Load()
    lock = threading.Lock()

    def client(k: int) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT_S) as c:
            i = 0
            while (requests is None or i < requests) and not (until and until.is_set()):
                outcome = one(c, ask(k + i, params))
                with lock:
                    load.outcomes.append(outcome)
                i += 1

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    load.wall_s = time.perf_counter() - t0
    return load


# -- the cluster -----------------------------------------------------------------------------------
class Cluster:
    """A local Ray cluster with Serve's proxy on `port`; `deploy` (re)deploys the replicas."""

    def __init__(self, port: int, token: str, cpus: int | None = None) -> None:
        import logging

        import ray
        from ray import serve

        self.port = port
        self.token = token
        self.url = f"http://127.0.0.1:{port}"
        ray.init(num_cpus=cpus or os.cpu_count(), include_dashboard=False,
                 logging_level=logging.WARNING)  # fmt: skip
        serve.start(http_options={"host": "127.0.0.1", "port": port})

    def deploy(
        self,
        replicas: int,
        loader: FaultyLoader | None = None,
        wedged_s: float = WEDGED_S,
        health_period_s: float = 5.0,
    ) -> None:
        from ray import serve

        from infill_engine.deploy.app import build_app

        spec = ReplicaSpec(token=self.token, threads=1, wedged_s=wedged_s)
        scaling = Scaling(
            replicas=replicas, health_period_s=health_period_s, health_timeout_s=health_period_s
        )
        serve.run(build_app(spec, scaling, loader), name=APPLICATION, route_prefix="/")
        wait_for(lambda: self.running() == replicas and len(replica_ids()) == replicas, 120)

    def running(self) -> int:
        from ray import serve

        app = serve.status().applications.get(APPLICATION)
        if app is None or DEPLOYMENT not in app.deployments:
            return 0
        return int(app.deployments[DEPLOYMENT].replica_states.get("RUNNING", 0))

    def warm(self, replicas: int, params: dict[str, Any]) -> None:
        """Each replica's first fills are slow (first passes of torch): some for each."""
        run_load(self.url, self.token, 2 * replicas, params, requests=2)

    def metrics(self) -> dict[str, float]:
        r = httpx.get(f"{self.url}/metrics", headers={"Authorization": f"Bearer {self.token}"})
        r.raise_for_status()
        out = {}
        for line in r.text.splitlines():
            name, _, value = line.partition(" ")
            if line and not line.startswith("#") and "{" not in name:
                out[name] = float(value)
        return out

    def close(self) -> None:
        import ray
        from ray import serve

        serve.shutdown()
        ray.shutdown()


def replica_ids() -> set[str]:
    import ray

    named = ray.util.list_named_actors(all_namespaces=True)
    return {a["name"] for a in named if a["name"].startswith(REPLICA_PREFIX)}


def wait_for(cond: Callable[[], bool], timeout: float, every: float = 0.1) -> float:
    """Seconds until `cond()` held; TimeoutError after `timeout`."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"not within {timeout:g} s")
        time.sleep(every)
    return time.monotonic() - t0


# -- the scenarios ---------------------------------------------------------------------------------
def scale(cluster: Cluster, clients: int, requests: int, rounds: int, params: dict[str, Any]
          ) -> dict[str, Any]:  # fmt: skip
    """1 replica against 2, alternating, the same load on each."""
    loads: dict[int, Load] = {1: Load(), 2: Load()}
    for _ in range(rounds):
        for n in (1, 2):
            cluster.deploy(n)
            cluster.warm(n, params)
            got = run_load(cluster.url, cluster.token, clients, params, requests=requests)
            loads[n].outcomes += got.outcomes
            loads[n].wall_s += got.wall_s
    one, two = loads[1].summary(), loads[2].summary()
    ratio = two["req_per_s"] / one["req_per_s"] if one["req_per_s"] else 0.0
    return {"clients": clients, "replicas_1": one, "replicas_2": two,
            "throughput_ratio": round(ratio, 2)}  # fmt: skip


def _under_load(
    cluster: Cluster, clients: int, params: dict[str, Any], fault: Callable[[], None],
    recovered: Callable[[], bool], after_s: float = 1.0, timeout_s: float = 120.0,
) -> dict[str, Any]:  # fmt: skip
    """Load from `clients`; `after_s` in, `fault()`; the seconds until `recovered()` holds;
    then one more second of load, and the load's outcomes."""
    stop = threading.Event()
    result: list[Load] = []
    loader = threading.Thread(
        target=lambda: result.append(
            run_load(cluster.url, cluster.token, clients, params, until=stop)
        )
    )
    loader.start()
    time.sleep(after_s)
    fault()
    try:
        recovered_s = wait_for(recovered, timeout_s)
    finally:
        time.sleep(1.0)
        stop.set()
        loader.join()
    return {"recovered_s": round(recovered_s, 2), **result[0].summary()}


def kill(cluster: Cluster, clients: int, params: dict[str, Any]) -> dict[str, Any]:
    """2 replicas; one replica's actor is killed under load."""
    import ray

    cluster.deploy(2)
    cluster.warm(2, params)
    before = replica_ids()
    victim = sorted(before)[0]

    def fault() -> None:
        ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)

    def recovered() -> bool:
        ids = replica_ids()
        return victim not in ids and len(ids) == 2 and cluster.running() == 2

    return _under_load(cluster, clients, params, fault, recovered)


def wedge(cluster: Cluster, clients: int, params: dict[str, Any], wedged_s: float = 2.0
          ) -> dict[str, Any]:  # fmt: skip
    """2 replicas whose steps hang once a trigger file appears; the first step to see it hangs
    its replica, which the health check must take out."""
    with tempfile.TemporaryDirectory(prefix="dllm-wedge-") as tmp:
        trigger = os.path.join(tmp, "hang")
        cluster.deploy(2, FaultyLoader(hang_trigger=trigger), wedged_s=wedged_s,
                       health_period_s=1.0)  # fmt: skip
        cluster.warm(2, params)
        before = replica_ids()

        def fault() -> None:
            with open(trigger, "w"):
                pass

        def recovered() -> bool:
            ids = replica_ids()
            return not os.path.exists(trigger) and len(ids - before) == 1 and len(ids) == 2 \
                and cluster.running() == 2  # fmt: skip

        out = _under_load(cluster, clients, params, fault, recovered)
    return {"wedged_s": wedged_s, "health_period_s": 1.0, **out}


def cancel(cluster: Cluster) -> dict[str, Any]:
    """1 replica; a client posts a 200-pass fill and hangs up once it runs."""
    cluster.deploy(1)
    before = cluster.metrics()
    span = 200
    body = json.dumps({**ask(0, {"span": span, "max_span": span, "threshold": 1.5,
                                 "min_tokens": span})}).encode()  # fmt: skip
    s = socket.create_connection(("127.0.0.1", cluster.port), timeout=30)
    s.sendall(b"POST /v2/infill HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
              cluster.token.encode() + b"\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)  # fmt: skip
    wait_for(lambda: cluster.metrics()["dllm_running_rows"] == 1, 30)
    s.close()
    t0 = time.monotonic()
    wait_for(lambda: cluster.metrics()["dllm_running_rows"] == 0, 30, every=0.02)
    freed_ms = (time.monotonic() - t0) * 1000
    after = cluster.metrics()

    def delta(name: str) -> int:
        return int(after.get(name, 0) - before.get(name, 0))

    return {
        "freed_ms": round(freed_ms, 1),
        "cancelled": delta("dllm_scheduler_cancelled_total"),
        "done": delta("dllm_scheduler_done_total"),
        "disconnect_cancels": delta("dllm_service_disconnect_cancels_total"),
        "steps_run": delta("dllm_scheduler_steps_total"),
        "steps_asked": span,
    }


def ingress(cluster: Cluster, clients: int, params: dict[str, Any], seconds: float = 3.0
            ) -> dict[str, Any]:  # fmt: skip
    """What the way in costs: `GET /health` (no engine work) from `clients` threads for
    `seconds`, and one client's native calls one after another, through Serve's proxy to one
    replica and straight to the same HTTP front under uvicorn in this process."""
    import torch

    from infill_engine import load
    from infill_engine.service import Service, ServiceThread, parse_address

    cluster.deploy(1)
    cluster.warm(1, params)
    torch.set_num_threads(1)
    engine = load("builtin", device="cpu")
    service = Service(engine, "builtin", cluster.token)
    out: dict[str, Any] = {}
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as direct:
        assert direct.bound is not None
        urls = {"ray": cluster.url, "direct": f"http://127.0.0.1:{direct.bound.port}"}
        run_load(urls["direct"], cluster.token, 2, params, requests=2)  # warm
        for name, url in urls.items():
            out[f"health_per_s_{name}"] = round(_health_rate(url, clients, seconds), 1)
            one = run_load(url, cluster.token, 1, params, requests=20).summary()
            out[f"native_p50_ms_{name}"] = one["p50_ms"]
    engine.close()
    out["native_overhead_ms"] = round(out["native_p50_ms_ray"] - out["native_p50_ms_direct"], 1)
    return out


def _health_rate(url: str, clients: int, seconds: float) -> float:
    count = 0
    lock = threading.Lock()
    end = time.perf_counter() + seconds

    def client() -> None:
        nonlocal count
        with httpx.Client(base_url=url, timeout=TIMEOUT_S) as c:
            while time.perf_counter() < end:
                c.get("/health").raise_for_status()
                with lock:
                    count += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return count / (time.perf_counter() - t0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="dllm-infill bench-ray",
        description="Replicas on a local Ray Serve cluster: 1 against 2, a killed replica, a "
        "wedged one, a client that hangs up (needs the ray extra).",
    )
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=4, help="per client, in the scale runs")
    ap.add_argument("--rounds", type=int, default=2, help="alternating 1 and 2 replica runs")
    ap.add_argument("--span", type=int, default=32)
    ap.add_argument("--port", type=int, default=0, help="Serve's HTTP port (default: a free one)")
    ap.add_argument(
        "--only", default="scale,ingress,kill,wedge,cancel", help="scenarios, comma-separated"
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        import ray  # noqa: F401
    except ImportError:
        print("dllm-infill bench-ray: needs Ray: pip install -e '.[ray]'", file=sys.stderr)
        return 2
    params = {"span": a.span, "min_tokens": 1}
    cluster = Cluster(a.port or free_port(), "bench-token")
    report: dict[str, Any] = {"cpus": os.cpu_count(), "threads_per_replica": 1}
    try:
        for name in a.only.split(","):
            if name == "scale":
                report[name] = scale(cluster, a.clients, a.requests, a.rounds, params)
            elif name == "ingress":
                report[name] = ingress(cluster, a.clients, params)
            elif name == "kill":
                report[name] = kill(cluster, a.clients, params)
            elif name == "wedge":
                report[name] = wedge(cluster, a.clients, params)
            elif name == "cancel":
                report[name] = cancel(cluster)
            print(f"bench-ray: {name} done", file=sys.stderr, flush=True)
    finally:
        cluster.close()
    print(json.dumps(report, indent=2 if not a.json else None))
    return 0
