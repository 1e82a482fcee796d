"""The Ray Serve deployment as plain data (infill_engine/deploy/spec.py): no Ray needed. What a
config file's `args` become, the options Serve gets, and the refusals of bad settings."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from infill_engine.deploy.spec import (
    DEPLOYMENT,
    ReplicaSpec,
    Scaling,
    deployment_options,
    from_args,
    with_gpus,
)
from infill_engine.service import ServeError


def test_fixed_replicas_get_their_count_cpus_gpus_and_health_checks() -> None:
    spec = ReplicaSpec(token="t", threads=2, gpus=1, max_batch=8)
    options = deployment_options(spec, Scaling(replicas=3, health_period_s=2))
    assert options["name"] == DEPLOYMENT and options["num_replicas"] == 3
    assert "autoscaling_config" not in options
    assert options["ray_actor_options"] == {"num_cpus": 2, "num_gpus": 1}
    assert options["max_ongoing_requests"] == 16  # two batches: one running, one queued
    assert options["health_check_period_s"] == 2


def test_a_replica_takes_one_gpu_where_the_cluster_has_gpus_unless_told() -> None:
    assert with_gpus(ReplicaSpec(), cluster_gpus=8).gpus == 1
    assert with_gpus(ReplicaSpec(), cluster_gpus=0).gpus == 0
    assert with_gpus(ReplicaSpec(device="cpu"), cluster_gpus=8).gpus == 0
    assert with_gpus(ReplicaSpec(gpus=0.5), cluster_gpus=8).gpus == 0.5
    assert deployment_options(ReplicaSpec(), Scaling())["ray_actor_options"]["num_gpus"] == 0


def test_autoscaling_follows_the_requests_per_replica() -> None:
    spec = ReplicaSpec(token="t", max_batch=4)
    options = deployment_options(spec, Scaling(min_replicas=1, max_replicas=6))
    assert "num_replicas" not in options
    auto = options["autoscaling_config"]
    assert auto == {"min_replicas": 1, "max_replicas": 6, "target_ongoing_requests": 4}


@pytest.mark.parametrize(
    "bad",
    [
        {"replicas": 0},
        {"min_replicas": 2},  # without max_replicas
        {"min_replicas": 3, "max_replicas": 2},
        {"min_replicas": 0, "max_replicas": 0},
        {"health_period_s": 0},
    ],
)
def test_bad_scaling_is_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ServeError):
        Scaling(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [{"threads": 0}, {"max_batch": 0}, {"gpus": -1}, {"wedged_s": 0}])
def test_bad_replica_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ServeError):
        ReplicaSpec(**bad)  # type: ignore[arg-type]


def test_config_args_need_a_token_and_known_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DLLM_SERVE_TOKEN", raising=False)
    with pytest.raises(ServeError, match="token"):
        from_args({"replicas": 2})
    monkeypatch.setenv("DLLM_SERVE_TOKEN", "from-env")
    with pytest.raises(ServeError, match="unknown args: replicaz"):
        from_args({"replicaz": 2})
    with pytest.raises(ServeError):
        from_args({"replicas": "two"})
    spec, scaling = from_args({"replicas": 2, "threads": 2, "model": "/models/x"})
    assert spec.token == "from-env" and spec.threads == 2 and spec.model == "/models/x"
    assert scaling.replicas == 2


def test_the_documented_config_files_hold_valid_args(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/deploy/serve.yaml (for `serve run` / `serve deploy`) and the KubeRay RayService
    example name the builder and give args that from_args takes."""
    monkeypatch.setenv("DLLM_SERVE_TOKEN", "t")
    serve_cfg = yaml.safe_load((ROOT / "docs/deploy/serve.yaml").read_text())
    kuberay = yaml.safe_load((ROOT / "docs/deploy/rayservice.yaml").read_text())
    inner = yaml.safe_load(kuberay["spec"]["serveConfigV2"])
    for cfg in (serve_cfg, inner):
        (app,) = cfg["applications"]
        assert app["import_path"] == "infill_engine.deploy.app:app"
        args = {k: v for k, v in app["args"].items() if k != "token_file"}
        spec, scaling = from_args(args)
        assert deployment_options(spec, scaling)["name"] == DEPLOYMENT
    assert Path(ROOT / "docs/deploy.md").is_file()
