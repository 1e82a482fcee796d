"""What a replica's health check reads, on a single server (no Ray): `Service.wedged()` and
`/health`, from the scheduler's `busy_s` and its worker. A planted fault (lab/faults.py) hangs
one step of the builtin engine for 3 s."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from dllm_lab.bench_ray import ask, wait_for
from dllm_lab.faults import FaultyLoader
from infill_engine.deploy.spec import ReplicaSpec
from infill_engine.service import Service, ServiceThread, parse_address

TOKEN = "health-token"


def test_a_step_past_the_bound_turns_health_to_503_until_it_returns(tmp_path: Path) -> None:
    trigger = tmp_path / "hang"
    trigger.touch()
    engine = FaultyLoader(hang_trigger=str(trigger), hang_s=3.0)(ReplicaSpec())
    service = Service(engine, "builtin", TOKEN, wedged_s=0.5)
    assert service.wedged() is None
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        url = f"http://127.0.0.1:{http.bound.port}"
        assert httpx.get(f"{url}/health").json()["status"] == "ok"
        answers: list[int] = []

        def post() -> None:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            body = ask(0, {"span": 8})
            answers.append(httpx.post(f"{url}/v2/infill", json=body, headers=auth,
                                      timeout=60).status_code)  # fmt: skip

        client = threading.Thread(target=post)
        client.start()
        wait_for(lambda: httpx.get(f"{url}/health").status_code == 503, 10)
        health = httpx.get(f"{url}/health").json()
        assert health["status"] == "wedged" and "one step has run for" in health["reason"]
        assert service.wedged() is not None and not trigger.exists()
        client.join(30)
        assert answers == [200]  # the step came back; its request was answered
        assert httpx.get(f"{url}/health").json()["status"] == "ok"
        assert service.wedged() is None
    # closed: the worker is gone, and that is a reason too
    assert service.wedged() == "the scheduler has stopped"
    engine.close()


@pytest.mark.ray
def test_a_replica_whose_engine_fails_to_load_is_dropped_quietly() -> None:
    """Its engine never loaded, so it has no service: dropping it raised AttributeError."""
    pytest.importorskip("ray.serve")
    from infill_engine.deploy.replica import InfillReplica

    never_loaded = object.__new__(InfillReplica)  # __init__ raised before setting service
    never_loaded.__del__()  # nothing to shut down, and no error
