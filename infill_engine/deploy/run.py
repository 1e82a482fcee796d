"""`dllm-infill serve --ray`: start (or join) a Ray cluster, start Serve's HTTP proxy on the
`--listen` address, deploy the replicas and serve until stopped."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable

import ray
from ray import serve

from ..service.listen import Address, ServeError
from .app import build_app
from .replica import Loader
from .spec import APPLICATION, ReplicaSpec, Scaling


def start_cluster(ray_address: str | None, spec: ReplicaSpec, scaling: Scaling) -> None:
    """Join the cluster at `ray_address` ("auto": the one `ray start` made on this machine), or
    start a local one, which must hold the replicas' CPUs (Serve would wait for them forever)."""
    if ray_address:
        ray.init(address=ray_address, logging_level=logging.WARNING)
        return
    cpus = os.cpu_count() or 1
    need = spec.threads * (scaling.max_replicas or scaling.replicas)
    if need > cpus:
        raise ServeError(
            f"{need} replica CPUs (replicas x --threads) do not fit this machine's {cpus}; "
            "fewer replicas or threads, or join a larger cluster with --ray-address"
        )
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)


def deploy(
    spec: ReplicaSpec, scaling: Scaling, address: Address, loader: Loader | None = None
) -> None:
    """Serve's proxy on `address`, and the application at `/`; returns once it is running."""
    serve.start(http_options={"host": address.host, "port": address.port})
    serve.run(build_app(spec, scaling, loader), name=APPLICATION, route_prefix="/")


def serve_ray(
    spec: ReplicaSpec,
    scaling: Scaling,
    address: Address,
    ray_address: str | None = None,
    ready: Callable[[Address], None] | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM; a local cluster is shut down with it, a joined one keeps
    running without this application."""
    start_cluster(ray_address, spec, scaling)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # after ray.init, which sets its own handlers
        signal.signal(sig, lambda *_: stop.set())
    try:
        deploy(spec, scaling, address)
        if ready is not None:
            ready(address)
        stop.wait()
    finally:
        try:
            serve.delete(APPLICATION)
            if not ray_address:
                serve.shutdown()
        finally:
            ray.shutdown()
