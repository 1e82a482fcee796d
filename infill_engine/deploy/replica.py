"""One Ray Serve replica: an engine with its own scheduler behind the same HTTP front as
`dllm-infill serve --listen http://…` (service/http.py), so the routes, the token, the error
codes and step-level batching inside a replica are the single server's.

Ray Serve routes each request to a replica (power of two choices on the requests each has in
flight), restarts replicas whose actor dies, and calls `check_health` every
`health_check_period_s`: a replica whose scheduler stopped, or whose step has run past
`wedged_s`, raises there and is replaced. A client that hangs up has its request cancelled in the
replica by Serve's proxy; the HTTP front then drops its rows from the batch (http.py, `_rows`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ray import serve

from ..engine import Engine
from ..service.front import Service
from ..service.http import HttpFront
from .spec import ReplicaSpec, load_engine

Loader = Callable[[ReplicaSpec], Engine]


class WedgedReplica(RuntimeError):
    """The health check's failure: Serve replaces the replica."""


@serve.ingress()
class InfillReplica:
    """`loader` makes the engine (default `load_engine`); it is pickled with the deployment, so
    a test or a bench can hand in its own (lab/dllm_lab/faults.py)."""

    def __init__(self, spec: ReplicaSpec, loader: Loader | None = None) -> None:
        engine = (loader or load_engine)(spec)
        engine.scheduler(max_queue=spec.max_queue, max_batch=spec.max_batch)  # its sizes
        self.service = Service(engine, spec.model, spec.token, wedged_s=spec.wedged_s)
        self.front = HttpFront(self.service)

    def __serve_build_asgi_app__(self) -> Any:
        return self.front.app

    def check_health(self) -> None:
        why = self.service.wedged()
        if why is not None:
            raise WedgedReplica(why)

    def __del__(self) -> None:
        service = getattr(self, "service", None)  # None: the engine failed to load
        if service is not None:
            service.shutdown()
