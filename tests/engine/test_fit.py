"""Does it fit (fits.py, `dllm-infill check`, the service's start-up check): the arithmetic
agrees with the bytes the real parts hold, and a model that cannot fit fails before it loads,
with the numbers and the options that would make it fit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import ROOT, make_dream
from hub_standin import HubStandIn, read_dir

from infill_engine import fits, load
from infill_engine.cache import KVCache
from infill_engine.models.shapes import shape_args
from infill_engine.quantize import weight_bytes

CLI = [sys.executable, "-m", "infill_engine.cli"]


@pytest.fixture(scope="module")
def dream_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dream")
    make_dream(path)
    return path


@pytest.mark.parametrize(
    ("quantize", "dtype", "bound"),
    # int8's scales and int4's groups are counted as the real layers of 7B widths hold them;
    # this tiny model's 64-wide layers take int4 groups of 64 (quantize.py), hence 2%
    [("none", "float32", 0.0), ("none", "bfloat16", 0.0), ("int8", "float32", 0.01),
     ("int4", "float32", 0.02)],
)  # fmt: skip
def test_weights_are_the_bytes_the_loaded_model_holds(
    dream_dir: Path, quantize: str, dtype: str, bound: float
) -> None:
    engine = load(str(dream_dir), device="cpu", dtype=dtype, quantize=quantize)
    real = weight_bytes(engine.model)
    estimate = fits.estimate(engine.args, device="cpu", free=1 << 40, quantize=quantize,
                            dtype=dtype).weights  # fmt: skip
    assert abs(estimate - real) <= bound * real


@pytest.mark.parametrize("quantize", ["int8", "int4"])
def test_loading_quantized_adds_one_full_precision_block(dream_dir: Path, quantize: str) -> None:
    full = load(str(dream_dir), device="cpu").model.layers[0]
    small = load(str(dream_dir), device="cpu", quantize=quantize).model.layers[0]
    extra = weight_bytes(full) - weight_bytes(small)  # the norms cancel out
    args = load(str(dream_dir), device="cpu").args
    assert abs(fits.block_extra(args, quantize, 4) - extra) <= 0.05 * weight_bytes(full)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="a device's peak needs CUDA")
def test_a_quantized_load_never_holds_every_block_at_full_precision(tmp_path: Path) -> None:
    make_dream(tmp_path, layers=8)
    whole = load(str(tmp_path), device="cuda", dtype="bf16")
    full = weight_bytes(whole.model)
    whole.close()
    del whole
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    load(str(tmp_path), device="cuda", dtype="bf16", quantize="int8")
    assert torch.cuda.max_memory_allocated() < full


def test_cache_per_row_is_what_the_kv_cache_allocates() -> None:
    _, args, _ = shape_args("dream-7b", layers=2)
    context = 300
    cache = KVCache(args.num_layers, batch=1, length=context)
    k = torch.zeros(1, args.num_kv_heads, 5, args.head_dim, dtype=torch.bfloat16)
    for layer in range(args.num_layers):
        cache.store(layer, None, k, k)
    held = sum(t.numel() * t.element_size() for t in (*cache.k, *cache.v))
    assert fits.cache_bytes(args, context, 2) == held


def test_dream_7b_int4_on_a_12_gb_card() -> None:
    """The README's figures: `dllm-infill check --shape dream-7b --device cuda --quantize int4
    --memory 12`."""
    _, args, _ = shape_args("dream-7b")
    f = fits.estimate(args, device="cuda", free=12 * 10**9, quantize="int4")
    assert round(f.params / 1e9, 2) == 7.62
    assert 5.5e9 < f.weights < 5.8e9 and f.fits and f.largest_batch == 12
    bf16 = fits.estimate(args, device="cuda", free=12 * 10**9, batch=4)
    assert not bf16.fits and bf16.largest_batch == 0
    assert fits.remedies(bf16, args)[0].startswith("--quantize int8 (weights 8.71 GB")


def test_check_cli(tmp_path: Path) -> None:
    ok = _run("check", "--shape", "dream-7b", "--device", "cuda", "--quantize", "int4",
              "--memory", "12", "--json")  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["fits"] and out["largest_batch"] == 12 and out["quantize"] == "int4"
    too_big = _run("check", "--shape", "dream-7b", "--device", "cuda", "--memory", "12",
                   "--batch", "4")  # fmt: skip
    assert too_big.returncode == 1
    assert "weights    15.23 GB at bfloat16" in too_big.stdout
    assert "does not fit: needs 17.61 GB, 12.00 GB free; would fit with --quantize int8" in (
        too_big.stdout
    )
    bad = _run("check", "--model", str(tmp_path / "nothing-here"), "--device", "cpu")
    assert bad.returncode == 2 and "no such directory" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--memory", "inf"], "argument --memory: must be a number of GB above 0 and at most "
      "1000000, got 'inf'"),
     (["--memory", "-5"], "argument --memory: must be a number of GB above 0 and at most "
      "1000000, got '-5'"),
     (["--context", "1e12"], "argument --context: must be a whole number of tokens from 1 to "
      "16777216, got '1e12'"),
     (["--context", "100000"], "--context 100000 exceeds the model's 384 positions")],
)  # fmt: skip
def test_check_refuses_numbers_it_cannot_plan_with_in_one_line(
    args: list[str], message: str
) -> None:
    """`--memory inf` once overflowed, `--memory -5` was planned with, and `--context 1e12`
    suggested a context past the builtin model's 384 positions."""
    r = _run("check", "--device", "cpu", *args)
    assert r.returncode == 2, r.stdout
    assert r.stderr == f"dllm-infill check: {message}\n"
    assert r.stdout == ""


@pytest.fixture
def hub(tmp_path: Path, dream_dir: Path) -> Iterator[HubStandIn]:
    with HubStandIn() as h:
        files = read_dir(dream_dir)
        config = json.loads(files["config.json"])
        config.update(hidden_size=8192, intermediate_size=32768, num_hidden_layers=2000,
                      num_attention_heads=64, num_key_value_heads=8)  # fmt: skip
        h.repo("org/huge").add(dict(files, **{"config.json": json.dumps(config).encode()}))
        yield h


def test_serve_refuses_a_model_that_cannot_fit_before_it_downloads(
    hub: HubStandIn, tmp_path: Path
) -> None:
    """2000 blocks of 8192 wide: about 1.9 T parameters; no machine here holds that."""
    env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf"))
    sock = str(tmp_path / "s.sock")
    r = _run("serve", "--listen", f"unix:{sock}", "--model", "org/huge", "--device", "cpu",
             env=env)  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "does not fit: needs" in r.stderr and "float32" in r.stderr
    assert "Traceback" not in r.stderr
    fetched = {p.rsplit("/", 1)[1] for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p}
    assert fetched == {"config.json"}  # no weights downloaded


def test_check_of_a_hub_name_beside_a_folder_of_that_name_reads_the_hubs(
    hub: HubStandIn, tmp_path: Path, dream_dir: Path
) -> None:
    """A folder org/huge (a tiny model) in the working directory: `check --model org/huge`
    plans for the Hub's org/huge (1.9 T parameters) and says which it read."""
    work = tmp_path / "work"
    (work / "org" / "huge").mkdir(parents=True)
    (work / "org" / "huge" / "config.json").write_bytes((dream_dir / "config.json").read_bytes())
    env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf"))
    r = _run("check", "--model", "org/huge", "--device", "cpu", "--memory", "12", env=env,
             cwd=work)  # fmt: skip
    assert r.returncode == 1, r.stderr  # the Hub's: it does not fit
    assert "does not fit" in r.stdout
    assert r.stderr == (
        "model 'org/huge': loading the Hub model; the folder ./org/huge here is not used "
        "(write ./org/huge to load the folder)\n"
    )
    folder = _run("check", "--model", "./org/huge", "--device", "cpu", "--memory", "12",
                  env=env, cwd=work)  # fmt: skip
    assert folder.returncode == 0 and folder.stderr == "", folder.stderr  # the tiny folder fits


def test_serve_says_once_that_a_folder_named_like_the_hub_model_is_not_used(
    hub: HubStandIn, tmp_path: Path, dream_dir: Path
) -> None:
    """The start-up check and the load once each resolved the name, and each said so. The Hub's
    org/pickled (a tiny config, pickle weights) fits, then its load is refused from the listing:
    serve ends at once, the note said once, first."""
    config = (dream_dir / "config.json").read_bytes()
    hub.repo("org/pickled").add({"config.json": config, "pytorch_model.bin": b"x"})
    work = tmp_path / "work"
    (work / "org" / "pickled").mkdir(parents=True)
    (work / "org" / "pickled" / "config.json").write_bytes(config)
    env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf"))
    r = _run("serve", "--listen", f"unix:{tmp_path / 's.sock'}", "--model", "org/pickled",
             "--device", "cpu", env=env, cwd=work)  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    note = (
        "dllm-infill serve: model 'org/pickled': loading the Hub model; the folder ./org/pickled "
        "here is not used (write ./org/pickled to load the folder)"
    )
    assert lines[0] == note and lines.count(note) == 1, r.stderr
    assert any(line.startswith("dllm-infill serve: memory: weights") for line in lines), r.stderr
    assert "only pickle weights (pytorch_model.bin)" in lines[-1], r.stderr


def _run(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(env or os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=120, cwd=cwd
    )
