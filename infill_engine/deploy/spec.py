"""What a Ray Serve deployment of the engine is made of, as plain data: `ReplicaSpec` (what one
replica loads and how it serves) and `Scaling` (how many replicas, how they are checked), and the
Ray Serve deployment options they give. Nothing here imports Ray, so the options are tested
without it; replica.py and app.py build on them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..scheduler import MAX_BATCH, MAX_QUEUE
from ..service.front import WEDGED_S
from ..service.listen import ServeError, resolve_token

if TYPE_CHECKING:
    from ..engine import Engine

DEPLOYMENT = "infill"  # the deployment's name; its replicas' actors carry it
APPLICATION = "dllm-infill"  # the Serve application's name (`serve status` lists it)


@dataclass(frozen=True)
class ReplicaSpec:
    """One replica: one engine with its own scheduler, so requests routed to it are batched."""

    model: str = "builtin"
    device: str = "auto"
    dtype: str = "auto"
    qwen2_diffusion: bool = False
    quantize: str = "none"  # weight-only int8/int4 of each replica's engine (quantize.py)
    max_batch: int = MAX_BATCH
    max_queue: int = MAX_QUEUE
    threads: int = 1  # torch CPU threads, and the CPUs the replica reserves in Ray
    gpus: float | None = None  # GPUs it reserves; None: one where the cluster has GPUs
    token: str | None = None  # the bearer token every route but /health asks for
    wedged_s: float = WEDGED_S  # a step longer than this fails the health check

    def __post_init__(self) -> None:
        if self.max_batch < 1 or self.max_queue < 1 or self.threads < 1:
            raise ServeError("max_batch, max_queue and threads must be >= 1")
        if (self.gpus is not None and self.gpus < 0) or not self.wedged_s > 0:
            raise ServeError("gpus must be >= 0 and wedged_s > 0")


def with_gpus(spec: ReplicaSpec, cluster_gpus: float) -> ReplicaSpec:
    """`gpus` decided: as given, else one GPU per replica when the cluster has GPUs and the
    device may be one (not "cpu"), else none."""
    if spec.gpus is not None:
        return spec
    gpus = 1.0 if cluster_gpus >= 1 and spec.device != "cpu" else 0.0
    return dataclasses.replace(spec, gpus=gpus)


def load_engine(spec: ReplicaSpec) -> Engine:
    """A replica's engine, loaded as `dllm-infill serve` loads one (no remote code), on
    `spec.threads` torch threads."""
    import torch

    from .. import load

    torch.set_num_threads(spec.threads)
    return load(
        spec.model, device=spec.device, dtype=spec.dtype, qwen2_as_diffusion=spec.qwen2_diffusion,
        quantize=spec.quantize,
    )  # fmt: skip


@dataclass(frozen=True)
class Scaling:
    """`replicas` fixed, or autoscaling between `min_replicas` and `max_replicas` on the
    requests each replica has in flight (`target_ongoing`, by default its batch size)."""

    replicas: int = 1
    min_replicas: int | None = None
    max_replicas: int | None = None
    target_ongoing: float | None = None
    max_ongoing: int | None = None  # requests one replica holds; default 2 batches
    health_period_s: float = 5.0
    health_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ServeError("replicas must be >= 1")
        if (self.min_replicas is None) != (self.max_replicas is None):
            raise ServeError("autoscaling needs both min_replicas and max_replicas")
        low, high = self.min_replicas, self.max_replicas
        if (low is not None and high is not None and not 0 <= low <= high) or high == 0:
            raise ServeError("autoscaling needs 0 <= min_replicas <= max_replicas, max >= 1")
        if not self.health_period_s > 0 or not self.health_timeout_s > 0:
            raise ServeError("health_period_s and health_timeout_s must be > 0")

    @property
    def autoscaling(self) -> bool:
        return self.max_replicas is not None


def deployment_options(spec: ReplicaSpec, scaling: Scaling) -> dict[str, Any]:
    """The keyword arguments of `serve.deployment` for these replicas."""
    options: dict[str, Any] = {
        "name": DEPLOYMENT,
        # past this many, the proxy routes a request to another replica or holds it: two
        # batches' worth keeps one full batch running and the next one queued
        "max_ongoing_requests": scaling.max_ongoing or 2 * spec.max_batch,
        "ray_actor_options": {"num_cpus": spec.threads, "num_gpus": spec.gpus or 0},
        "health_check_period_s": scaling.health_period_s,
        "health_check_timeout_s": scaling.health_timeout_s,
        "graceful_shutdown_timeout_s": 5.0,
        # a line per request at INFO is noise for hundreds of editors; errors still log
        "logging_config": {"log_level": "WARNING", "enable_access_log": False},
    }
    if scaling.autoscaling:
        options["autoscaling_config"] = {
            "min_replicas": scaling.min_replicas,
            "max_replicas": scaling.max_replicas,
            "target_ongoing_requests": scaling.target_ongoing or spec.max_batch,
        }
    else:
        options["num_replicas"] = scaling.replicas
    return options


SPEC_FIELDS = {f.name for f in dataclasses.fields(ReplicaSpec)} - {"token"}
SCALING_FIELDS = {f.name for f in dataclasses.fields(Scaling)}


def from_args(args: Mapping[str, Any]) -> tuple[ReplicaSpec, Scaling]:
    """A Serve config file's `args` (docs/deploy.md): the fields of both, plus `token_file`;
    the token is read from that file or $DLLM_SERVE_TOKEN and is required."""
    unknown = set(args) - SPEC_FIELDS - SCALING_FIELDS - {"token_file"}
    if unknown:
        raise ServeError(f"unknown args: {', '.join(sorted(unknown))}")
    token = resolve_token(args.get("token_file"))
    if token is None:
        raise ServeError("the HTTP front needs a token: token_file or $DLLM_SERVE_TOKEN")
    try:
        spec = ReplicaSpec(token=token, **{k: v for k, v in args.items() if k in SPEC_FIELDS})
        scaling = Scaling(**{k: v for k, v in args.items() if k in SCALING_FIELDS})
    except TypeError as e:
        raise ServeError(str(e)) from None
    return spec, scaling
