"""`--quantize int8|int4`: weight-only quantization through torchao, on tiny random checkpoints of
every family, checked two ways.

- The kernels compute what the quantized weights say: the quantized model's logits equal those of
  the same model with its block weights replaced by their dequantized values (within fp32
  summation noise, 1e-4). This is what tells a broken kernel or layout from quantization error.
- The quantization error stays within a bound, as ‖Δ‖₂ / ‖logits‖₂ against the unquantized load:
  int8 per-row rounds each weight to 1/254 of its row's largest, about 0.6% of a random row's
  RMS; int4 in groups of 32 to 1/15 of the group's range, about 9%. The bounds are about twice
  what a two-layer dense stack measures here (docs/engine.md). Mixture-of-experts families get
  looser ones: their routers stay unquantized, but the router's input moves, and in a random tiny
  model many tokens sit near a tie between experts, so a few flip to another expert wholesale.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import ROOT, VOCAB, make_dream, make_llada
from test_coda import make_coda
from test_llada2 import make_llada2
from test_llada_moe import make_llada_moe

from infill_engine import load
from infill_engine.quantize import (
    QuantizeError,
    _warn_slow_int4,
    block_linears,
    check_mode,
    is_quantized,
    quantize_model,
    weight_bytes,
)


def make_qwen2_diffusion(path: Path) -> None:
    make_dream(path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "model_type": "qwen2"}))


# family -> (maker, int8 bound, int4 bound) on ‖Δ‖₂ / ‖logits‖₂
FAMILIES: dict[str, tuple[Callable[[Path], Any], float, float]] = {
    "dream": (make_dream, 0.02, 0.2),
    "llada": (make_llada, 0.02, 0.2),
    "coda": (lambda p: make_coda(p, stored_head=True), 0.02, 0.3),
    "qwen2-diffusion": (make_qwen2_diffusion, 0.02, 0.2),
    "llada-moe": (make_llada_moe, 0.1, 0.7),
    "llada2": (make_llada2, 0.2, 0.8),
}
IDS = torch.randint(0, VOCAB, (2, 33), generator=torch.Generator().manual_seed(5))


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp(request.param)
    FAMILIES[request.param][0](path)
    return request.param, path


def dequantized_copy(quantized: torch.nn.Module, plain: torch.nn.Module) -> None:
    """Give `plain`'s block linears the values `quantized`'s weights stand for: the quantized
    linear applied to the identity is W^T, whatever the packing."""
    weights = dict(block_linears(quantized))
    with torch.no_grad():
        for name, layer in block_linears(plain):
            w = weights[name].weight
            layer.weight.copy_(torch.nn.functional.linear(torch.eye(w.shape[1]), w).T)


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_logits_within_tolerance_on_every_family(family_dir: Any, mode: str) -> None:
    family, path = family_dir
    q2 = family == "qwen2-diffusion"
    ref = load(str(path), device="cpu", qwen2_as_diffusion=q2)
    ours = load(str(path), device="cpu", qwen2_as_diffusion=q2, quantize=mode)
    want = ref.logits(IDS)
    got = ours.logits(IDS)
    rel = ((got - want).norm() / want.norm()).item()
    bound = FAMILIES[family][1 if mode == "int8" else 2]
    assert 0 < rel <= bound, (family, mode, rel)
    dequantized_copy(ours.model, ref.model)
    assert (got - ref.logits(IDS)).abs().max().item() <= 1e-4


@pytest.mark.parametrize(
    ("mode", "kind", "packed"), [("int8", torch.int8, 1), ("int4", torch.uint8, 2)]
)
def test_weights_are_stored_quantized(
    dream_dir: Path, mode: str, kind: torch.dtype, packed: int
) -> None:
    plain = load(str(dream_dir), device="cpu")
    engine = load(str(dream_dir), device="cpu", quantize=mode)
    layers = dict(block_linears(engine.model))
    assert len(layers) == 2 * 7  # q, k, v, o, gate, up, down in each of two blocks
    for name, layer in layers.items():
        w = layer.weight
        assert is_quantized(w), name
        assert w.qdata.dtype == kind, (name, w.qdata.dtype)
        out_features, in_features = layer.out_features, layer.in_features
        assert w.qdata.numel() * packed == out_features * in_features, name  # int4: 2 a byte
    # the embedding and the output head keep the load precision
    assert not is_quantized(engine.model.lm_head.weight)
    assert engine.model.embed_tokens.weight.dtype == torch.float32
    assert weight_bytes(engine.model) < weight_bytes(plain.model)


def test_moe_routers_stay_at_full_precision(tmp_path: Path) -> None:
    make_llada_moe(tmp_path)
    engine = load(str(tmp_path), device="cpu", quantize="int8")
    gates = [m for n, m in engine.model.named_modules() if n.endswith(".mlp.gate")]
    assert gates and not any(is_quantized(g.weight) for g in gates)
    experts = [m for n, m in block_linears(engine.model) if ".experts." in n]
    assert experts and all(is_quantized(m.weight) for m in experts)


def test_report_and_refusals(dream_dir: Path) -> None:
    engine = load(str(dream_dir), device="cpu")
    report = quantize_model(engine.model, "int8")
    assert report.layers == 14 and report.kept == ()
    assert report.bytes_after < report.bytes_before
    with pytest.raises(QuantizeError, match="quantized already"):
        quantize_model(engine.model, "int4")
    with pytest.raises(QuantizeError, match="one of none, int8, int4"):
        check_mode("int3")
    with pytest.raises(ValueError, match="int3"):
        load(str(dream_dir), device="cpu", quantize="int3")


def test_int4_on_the_cpu_in_fp32_says_how_to_make_it_fast(
    dream_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _warn_slow_int4.cache_clear()  # said once per process: an earlier test may have said it
    with caplog.at_level("WARNING", logger="infill_engine.quantize"):
        quantize_model(load(str(dream_dir), device="cpu").model, "int4")
        quantize_model(load(str(dream_dir), device="cpu").model, "int4")
    assert caplog.text.count("--dtype bf16") == 1  # once, not once per model or block
    bf16 = load(str(dream_dir), device="cpu", dtype="bf16", quantize="int4")
    assert all(is_quantized(m.weight) for _, m in block_linears(bf16.model))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infill_engine.cli", *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip


def test_fill_quantized_from_the_command_line(tmp_path: Path) -> None:
    src = tmp_path / "f.py"
    src.write_text("def add(a, b):\n    return \n")
    at = ("--line", "2", "--col", "12", "--span", "8", "--json")
    p = run_cli("fill", str(src), *at, "--quantize", "int4", "--dtype", "bf16")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["span"] == 8
    assert "Failed to load" not in p.stderr  # torchao's CUDA-only extensions, held back
    assert "slow int4 path" not in p.stderr  # bf16 activations: PyTorch's fast int4 kernel
    p = run_cli("fill", str(src), *at, "--quantize", "int3")
    assert p.returncode == 2 and "invalid choice: 'int3'" in p.stderr
