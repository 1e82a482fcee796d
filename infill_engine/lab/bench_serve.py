"""`dllm-infill bench-serve`: 1, 4 and 16 concurrent clients over a Unix socket against one
engine, with the scheduler batching them (max_batch 8) and one at a time (max_batch 1), measured
alternately in the same run; tokens/s, requests/s, p50/p95 latency and the gain of batching."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

BENCH_HOLES = [
    ("def add(a, b):\n    return ", "\n"),
    ("for i in range(", "):\n    print(i)\n"),
    ("import os\n\ndef read(path):\n    with open(path) as f:\n        ", "\n"),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ", "\n"),
    ("x = [1, 2, 3]\ntotal = ", "\nprint(total)\n"),
    ("def is_even(n):\n    ", "\n"),
]


def _percentile(xs: list[float], q: float) -> float:
    """Nearest rank."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))] if xs else 0.0


def _bench_clients(
    address: str, n: int, requests: int, params: dict[str, Any]
) -> tuple[list[float], int, float]:
    """n clients at once, each sending `requests` infills one after another: (latencies in ms,
    tokens committed, wall seconds)."""
    import threading
    import time

    from ..service import ServiceClient

    latencies: list[float] = []
    tokens = 0
    lock = threading.Lock()

    def client(k: int) -> None:
        nonlocal tokens
        with ServiceClient(address) as c:
            for i in range(requests):
                hole = BENCH_HOLES[(k + i) % len(BENCH_HOLES)]
                t0 = time.perf_counter()
                r = c.infill(*hole, params, priority="automatic")
                dt = (time.perf_counter() - t0) * 1000
                with lock:
                    latencies.append(dt)
                    tokens += int(r["tokens"])

    threads = [threading.Thread(target=client, args=(k,)) for k in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, tokens, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """`dllm-infill bench-serve`: concurrent clients over a Unix socket, batched vs one by one."""
    import contextlib
    import tempfile

    from .. import load
    from ..models.shapes import SHAPES
    from ..scheduler import Scheduler
    from ..service import Address, Service, ServiceClient, ServiceThread
    from .bench import shaped_engine

    ap = argparse.ArgumentParser(
        prog="dllm-infill bench-serve",
        description="Throughput and latency of `serve` for 1, 4, 16 concurrent clients, with "
        "max_batch=1 and --max-batch measured side by side in one run.",
    )
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--clients", default="1,4,16", help="concurrent clients, comma-separated")
    ap.add_argument("--requests", type=int, default=4, help="requests per client, one at a time")
    ap.add_argument("--span", type=int, default=32)
    ap.add_argument("--min-tokens", type=int, default=1)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2, help="alternating runs of each setting")
    ap.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        help="serve a random network in a released checkpoint's shape (a GPU check)",
    )
    ap.add_argument("--layers", type=int, help="with --shape: keep only this many layers")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        clients = [int(x) for x in a.clients.split(",") if x]
        if not clients or min(clients) < 1 or min(a.requests, a.repeat) < 1 or a.max_batch < 2:
            raise ValueError("--clients, --requests, --repeat must be >= 1, --max-batch >= 2")
        if a.layers is not None and not a.shape:
            raise ValueError("--layers needs --shape")
        engine = load(a.model, device=a.device)
        if a.shape:
            engine, a.model = shaped_engine(engine, a.shape, a.layers, seed=0)
    except (OSError, ValueError) as e:
        print(f"dllm-infill bench-serve: {e}", file=sys.stderr)
        return 2
    params = {"span": a.span, "min_tokens": min(a.min_tokens, a.span)}
    batches = (1, a.max_batch)
    # (clients, max_batch) -> latencies, tokens, wall seconds, row-steps, steps; summed over repeats
    runs: dict[tuple[int, int], list[Any]] = {}
    with tempfile.TemporaryDirectory(prefix="dllm-bench-") as tmp, contextlib.ExitStack() as stack:
        services: dict[int, tuple[Service, str]] = {}
        for mb in batches:
            queue = max(64, 2 * max(clients))
            service = Service(Scheduler(engine, max_queue=queue, max_batch=mb), "bench")
            address = Address("unix", path=f"{tmp}/b{mb}.sock")
            stack.enter_context(ServiceThread(service, address))
            services[mb] = service, str(address)
            with ServiceClient(str(address)) as warm:
                warm.infill(*BENCH_HOLES[0], params)
        # the two settings alternate, so that a change in the machine's load hits both
        for n in clients:
            for _ in range(a.repeat):
                for mb in batches:
                    service, address_text = services[mb]
                    before = service.scheduler.stats()
                    lat, tok, wall = _bench_clients(address_text, n, a.requests, params)
                    after = service.scheduler.stats()
                    run = runs.setdefault((n, mb), [[], 0, 0.0, 0, 0])
                    run[0] += lat
                    run[1] += tok
                    run[2] += wall
                    run[3] += after["row_steps"] - before["row_steps"]
                    run[4] += after["steps"] - before["steps"]
    rows: list[dict[str, Any]] = []
    for (n, mb), (lat, tok, wall, row_steps, steps) in runs.items():
        rows.append(
            {
                "clients": n,
                "max_batch": mb,
                "requests": len(lat),
                "wall_s": round(wall, 3),
                "req_per_s": round(len(lat) / wall, 2),
                "tok_per_s": round(tok / wall, 1),
                "p50_ms": round(_percentile(lat, 0.5), 1),
                "p95_ms": round(_percentile(lat, 0.95), 1),
                "mean_batch": round(row_steps / max(1, steps), 2),
            }
        )
    base = {r["clients"]: r for r in rows if r["max_batch"] == 1}
    for r in rows:
        b = base[r["clients"]]
        r["gain"] = round(r["req_per_s"] / b["req_per_s"], 2) if b["req_per_s"] else 0.0
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"model: {a.model}, device: {engine.device}, dtype: {engine.dtype}\n")
    print("| clients | max_batch | req/s | tok/s | p50 ms | p95 ms | mean batch | gain |")
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["clients"], r["max_batch"])):
        print(
            f"| {r['clients']} | {r['max_batch']} | {r['req_per_s']} | {r['tok_per_s']} "
            f"| {r['p50_ms']} | {r['p95_ms']} | {r['mean_batch']} | {r['gain']} |"
        )
    return 0
