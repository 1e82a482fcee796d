"""`dllm-infill serve --ray` runs the same start-up memory check as the plain `serve`
(cli_models.startup_check, fits.py) before Ray is touched: a model that cannot fit is refused
with the numbers, having fetched only its config.json and started no Ray process. Needs no Ray
cluster (nor the ray extra)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, make_dream
from hub_standin import HubStandIn, read_dir

CLI = [sys.executable, "-m", "infill_engine.cli", "serve", "--ray"]


def test_serve_ray_refuses_a_model_that_cannot_fit_before_ray_starts(tmp_path: Path) -> None:
    """2000 blocks of 8192 wide: about 1.9 T parameters; no machine here holds that."""
    make_dream(tmp_path / "dream")
    files = read_dir(tmp_path / "dream")
    config = json.loads(files["config.json"])
    config.update(hidden_size=8192, intermediate_size=32768, num_hidden_layers=2000,
                  num_attention_heads=64, num_key_value_heads=8)  # fmt: skip
    with HubStandIn() as hub:
        hub.repo("org/huge").add(dict(files, **{"config.json": json.dumps(config).encode()}))
        env = dict(
            os.environ, HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf"),
            PYTHONPATH=str(ROOT), DLLM_SERVE_TOKEN="t",
            RAY_ADDRESS="http://127.0.0.1:9",  # should anything reach Ray, it finds nothing
        )  # fmt: skip
        r = subprocess.run(
            [*CLI, "--listen", "http://127.0.0.1:9", "--model", "org/huge", "--device", "cpu"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "does not fit: needs" in r.stderr and "float32" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "ray" not in r.stderr.lower(), r.stderr
    fetched = {p.rsplit("/", 1)[1] for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p}
    assert fetched == {"config.json"}  # no weights downloaded
