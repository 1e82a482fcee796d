"""`dllm-infill serve --ray`: start (or join) a Ray cluster, start Serve's HTTP proxy on the
`--listen` address, deploy the replicas and serve until stopped."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from ray import serve

from ..service.listen import Address
from .app import build_app
from .cluster import Processes, start_cluster, stop_cluster
from .replica import Loader
from .spec import APPLICATION, ReplicaSpec, Scaling

NOTE_S = 1.0  # how often the processes under this one are noted while serving (cluster.py)


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
    """Serve until SIGINT or SIGTERM; a local cluster is shut down with it, within seconds and
    with no Ray process left, a joined one keeps running without this application."""
    start_cluster(ray_address, spec, scaling)
    processes = Processes()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # after ray.init, which sets its own handlers
        signal.signal(sig, lambda *_: stop.set())
    try:
        deploy(spec, scaling, address)
        processes.note()
        if ready is not None:
            ready(address)
        while not stop.wait(NOTE_S):
            processes.note()
    finally:
        stop_cluster(ray_address, processes)
