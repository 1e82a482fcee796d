"""`dllm-infill bench-serve`: 1, 4 and 16 concurrent clients against one engine, measured
alternately in the same run; tokens/s, requests/s, p50/p95 latency.

Two comparisons: `--compare batching` (default): over a Unix socket, the scheduler batching
(max_batch 8) against one at a time (max_batch 1), and the gain of batching. `--compare fronts`:
the same native calls (`v2/infill`: the service plans and tokenizes) through the msgpack front
on a Unix socket and through the HTTP front on a loopback port, at the same max_batch, and the
HTTP front's overhead per request (p50 and p95 latency minus the msgpack front's)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from infill_engine.service.metrics import nearest_rank

BENCH_HOLES = [
    ("def add(a, b):\n    return ", "\n"),
    ("for i in range(", "):\n    print(i)\n"),
    ("import os\n\ndef read(path):\n    with open(path) as f:\n        ", "\n"),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ", "\n"),
    ("x = [1, 2, 3]\ntotal = ", "\nprint(total)\n"),
    ("def is_even(n):\n    ", "\n"),
]


def native_ask(hole: tuple[str, str], params: dict[str, Any]) -> dict[str, Any]:
    """A bench hole as a native `v2/infill` call's fields."""
    prefix, suffix = hole
    return {"text": prefix + suffix, "offset": len(prefix), "languageId": "python",
            "params": params}  # fmt: skip


def _bench_clients(
    address: str, n: int, requests: int, params: dict[str, Any], token: str | None = None
) -> tuple[list[float], int, float]:
    """n clients at once, each sending `requests` fills one after another: (latencies in ms,
    tokens committed, wall seconds). A unix: address gets `infill` messages; with a token, a
    unix: address gets native `v2/infill` messages and an http:// address `POST /v2/infill`."""
    import threading
    import time

    latencies: list[float] = []
    tokens = 0
    lock = threading.Lock()

    def client(k: int) -> None:
        nonlocal tokens
        with _Client(address, token) as c:
            for i in range(requests):
                hole = BENCH_HOLES[(k + i) % len(BENCH_HOLES)]
                t0 = time.perf_counter()
                got = c.fill(hole, params)
                dt = (time.perf_counter() - t0) * 1000
                with lock:
                    latencies.append(dt)
                    tokens += got

    threads = [threading.Thread(target=client, args=(k,)) for k in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, tokens, time.perf_counter() - t0


class _Client:
    """One benchmark client: the msgpack client, or an HTTP client keeping its connection."""

    def __init__(self, address: str, token: str | None) -> None:
        from infill_engine.service import ServiceClient

        self.native = token is not None
        self.http: Any = None
        self.msgpack: Any = None
        if address.startswith("http://"):
            import httpx

            headers = {"Authorization": f"Bearer {token}"}
            self.http = httpx.Client(base_url=address, headers=headers, timeout=120)
        else:
            self.msgpack = ServiceClient(address, token)

    def fill(self, hole: tuple[str, str], params: dict[str, Any]) -> int:
        ask = native_ask(hole, params)
        if self.http is not None:
            r = self.http.post("/v2/infill", json=ask)
            r.raise_for_status()
            return int(r.json()["items"][0]["tokens"])
        if self.native:
            reply = self.msgpack.call("v2/infill", **ask)
            if "error" in reply:
                raise RuntimeError(str(reply["error"]))
            return int(reply["result"]["items"][0]["tokens"])
        prefix, suffix = hole
        return int(self.msgpack.infill(prefix, suffix, params, priority="automatic")["tokens"])

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        (self.http or self.msgpack).close()


def main(argv: list[str] | None = None) -> int:
    """`dllm-infill bench-serve`: concurrent clients over a Unix socket, batched vs one by one."""
    import contextlib
    import tempfile

    from infill_engine import load
    from infill_engine.models.shapes import SHAPES
    from infill_engine.scheduler import Scheduler
    from infill_engine.service import Address, Service, ServiceThread, parse_address

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
    ap.add_argument(
        "--compare",
        choices=("batching", "fronts"),
        default="batching",
        help="batching: max_batch 1 against --max-batch; fronts: msgpack against HTTP",
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        clients = [int(x) for x in a.clients.split(",") if x]
        if not clients or min(clients) < 1 or min(a.requests, a.repeat) < 1 or a.max_batch < 1:
            raise ValueError("--clients, --requests, --repeat and --max-batch must be >= 1")
        if a.compare == "batching" and a.max_batch < 2:
            raise ValueError("--compare batching needs --max-batch >= 2")
        if a.layers is not None and not a.shape:
            raise ValueError("--layers needs --shape")
        engine = load(a.model, device=a.device)
        if a.shape:
            engine, a.model = shaped_engine(engine, a.shape, a.layers, seed=0)
    except (OSError, ValueError) as e:
        print(f"dllm-infill bench-serve: {e}", file=sys.stderr)
        return 2
    params = {"span": a.span, "min_tokens": min(a.min_tokens, a.span)}
    fronts = a.compare == "fronts"
    settings = ("msgpack", "http") if fronts else (1, a.max_batch)
    token = "bench-token" if fronts else None
    # (clients, setting) -> latencies, tokens, wall seconds, row-steps, steps; summed over repeats
    runs: dict[tuple[int, Any], list[Any]] = {}
    max_queue = max(64, 2 * max(clients))
    served = 0

    @contextlib.contextmanager
    def serving(
        max_batch: int, names: tuple[str, ...], folder: str
    ) -> Iterator[tuple[Scheduler, dict[str, str]]]:
        """A service on the engine's scheduler, made with `max_batch` rows, on the fronts
        named (msgpack on a Unix socket in `folder`), each warmed with one fill: (its
        scheduler, front -> address). On leaving, the service shuts down and closes that
        scheduler, so that the next one is made afresh with its own size (an engine's scheduler
        is sized once)."""
        nonlocal served
        engine.scheduler(max_queue=max_queue, max_batch=max_batch)
        service = Service(engine, "bench", token)
        addresses: dict[str, str] = {}
        try:
            with contextlib.ExitStack() as stack:
                for front in names:
                    served += 1
                    if front == "http":
                        address = parse_address("http://127.0.0.1:0")
                    else:
                        address = Address("unix", path=f"{folder}/bench-{served}.sock")
                    bound = str(stack.enter_context(ServiceThread(service, address)).bound)
                    addresses[front] = bound
                    with _Client(bound, token) as warm:
                        warm.fill(BENCH_HOLES[0], params)
                yield service.scheduler, addresses
        finally:
            service.shutdown()

    def timed(n: int, setting: Any, scheduler: Scheduler, address: str) -> None:
        before = scheduler.stats()
        lat, tok, wall = _bench_clients(address, n, a.requests, params, token)
        after = scheduler.stats()
        run = runs.setdefault((n, setting), [[], 0, 0.0, 0, 0])
        run[0] += lat
        run[1] += tok
        run[2] += wall
        run[3] += after["row_steps"] - before["row_steps"]
        run[4] += after["steps"] - before["steps"]

    with tempfile.TemporaryDirectory(prefix="dllm-bench-") as tmp:
        # the settings alternate, so that a change in the machine's load hits each
        if fronts:  # one service, both fronts on its one scheduler, as in `dllm-infill serve`
            with serving(a.max_batch, ("msgpack", "http"), tmp) as (scheduler, addresses):
                for n in clients:
                    for _ in range(a.repeat):
                        for setting in settings:
                            timed(n, setting, scheduler, addresses[str(setting)])
        else:  # a service of its own for each run, on a scheduler of that run's max_batch
            for n in clients:
                for _ in range(a.repeat):
                    for setting in settings:
                        with serving(int(setting), ("msgpack",), tmp) as (scheduler, addresses):
                            timed(n, setting, scheduler, addresses["msgpack"])
    rows: list[dict[str, Any]] = []
    key = "front" if fronts else "max_batch"
    for (n, setting), (lat, tok, wall, row_steps, steps) in runs.items():
        rows.append(
            {
                "clients": n,
                key: setting,
                "requests": len(lat),
                "wall_s": round(wall, 3),
                "req_per_s": round(len(lat) / wall, 2),
                "tok_per_s": round(tok / wall, 1),
                "p50_ms": round(nearest_rank(lat, 50) or 0.0, 2),
                "p95_ms": round(nearest_rank(lat, 95) or 0.0, 2),
                "mean_batch": round(row_steps / max(1, steps), 2),
            }
        )
    base = {r["clients"]: r for r in rows if r[key] == settings[0]}
    for r in rows:
        b = base[r["clients"]]
        if fronts:
            r["overhead_p50_ms"] = round(r["p50_ms"] - b["p50_ms"], 2)
            r["overhead_p95_ms"] = round(r["p95_ms"] - b["p95_ms"], 2)
        else:
            r["gain"] = round(r["req_per_s"] / b["req_per_s"], 2) if b["req_per_s"] else 0.0
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"model: {a.model}, device: {engine.device}, dtype: {engine.dtype}\n")
    extra = ("overhead_p50_ms", "overhead_p95_ms") if fronts else ("gain",)
    columns = ("clients", key, "req_per_s", "tok_per_s", "p50_ms", "p95_ms", "mean_batch", *extra)
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for r in sorted(rows, key=lambda r: (r["clients"], str(r[key]))):
        print("| " + " | ".join(str(r[c]) for c in columns) + " |")
    return 0
