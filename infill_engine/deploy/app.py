"""The Ray Serve application: `build_app` for `dllm-infill serve --ray` and tests, `app` for a
Serve config file (`import_path: infill_engine.deploy.app:app`, docs/deploy.md)."""

from __future__ import annotations

from typing import Any

import ray
from ray import serve
from ray.serve import Application

from .replica import InfillReplica, Loader
from .spec import ReplicaSpec, Scaling, deployment_options, from_args, with_gpus


def build_app(spec: ReplicaSpec, scaling: Scaling, loader: Loader | None = None) -> Application:
    """The deployment bound to its spec; a replica's GPUs are decided here, from the cluster
    this process is connected to (none when it is not connected yet)."""
    gpus = ray.cluster_resources().get("GPU", 0) if ray.is_initialized() else 0
    spec = with_gpus(spec, gpus)
    deployment = serve.deployment(InfillReplica, **deployment_options(spec, scaling))
    return deployment.bind(spec, loader)


def app(args: dict[str, Any]) -> Application:
    """The builder `serve run` / `serve deploy` call with a config file's `args`."""
    spec, scaling = from_args(args)
    return build_app(spec, scaling)
