"""Released checkpoints' shapes for random models, and the pass-time table built on them."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import pytest
import torch
from conftest import ROOT

from dllm_lab import pass_timing
from dllm_lab.bench import random_engine
from infill_engine.models import DiffusionTransformer
from infill_engine.models.shapes import SHAPES, parameter_count, shape_args


@pytest.mark.parametrize(
    ("name", "family", "billions", "layers", "kv_heads"),
    [
        ("dream-7b", "dream", 7.62, 28, 4),
        ("llada-8b", "llada", 8.02, 32, 32),
        ("coda-1.7b", "coda", 1.72, 28, 8),
        ("llada-moe-7b", "llada-moe", 7.36, 16, 16),
        ("llada2-mini", "llada2", 16.26, 20, 4),
    ],
)
def test_shapes_parse_like_the_released_configs(
    name: str, family: str, billions: float, layers: int, kv_heads: int
) -> None:
    fam, args, mask_id = shape_args(name)
    assert fam.name == family and mask_id == fam.default_mask_id
    assert (args.num_layers, args.num_kv_heads, args.head_dim) == (layers, kv_heads, 128)
    assert round(parameter_count(args) / 1e9, 2) == billions  # the model cards' sizes
    with torch.device("meta"):  # counts the real module without allocating 15 GB
        model = DiffusionTransformer(args)
    assert parameter_count(args) == sum(p.numel() for p in model.parameters())


def test_fewer_layers_keep_the_widths() -> None:
    _, full, _ = shape_args("llada-8b")
    _, cut, _ = shape_args("llada-8b", layers=2)
    assert cut == dataclasses.replace(full, num_layers=2)
    with pytest.raises(ValueError, match=r"layers must be in 1\.\.32"):
        shape_args("llada-8b", layers=33)
    with pytest.raises(ValueError, match="unknown shape 'gpt-2'"):
        shape_args("gpt-2")
    assert sorted(SHAPES) == ["coda-1.7b", "dream-7b", "llada-8b", "llada-moe-7b", "llada2-mini"]


def test_random_engine_decodes_with_the_base_tokenizer(dream_engine: Any) -> None:
    args = dataclasses.replace(dream_engine.args, num_layers=1, max_positions=512)
    engine = random_engine(dream_engine, args, seed=0)
    assert engine.args.num_layers == 1 and engine.args.max_positions == 512
    assert all(p.device.type == "cpu" and p.is_floating_point() for p in engine.model.parameters())
    assert all(torch.isfinite(p).all() for p in engine.model.parameters())  # no meta leftovers
    r = engine.infill("def f(x):\n    return ", "\n", None)
    assert r.nfe >= 1 and r.stop_reason in ("end_token", "span_full", "syntax")


def test_pass_times_are_measured_against_measured_ceilings(dream_engine: Any) -> None:
    model = dream_engine.model
    ceilings = pass_timing.Ceilings(bandwidth_gbs=10.0, matmul_tflops=0.1)
    rows = pass_timing.time_passes(model, [32, 64, 10**9], 8, [1, 2], ceilings, reps=3)
    # the canvas longer than the model's positions is skipped; full passes at batch 1 only
    assert [(r.kind, r.batch, r.canvas) for r in rows] == [
        ("full", 1, 32), ("block", 1, 32), ("block", 2, 32),
        ("full", 1, 64), ("block", 1, 64), ("block", 2, 64),
    ]  # fmt: skip
    by = {(r.kind, r.batch, r.canvas): r for r in rows}
    assert all(r.ms > 0 and r.of_limit > 0 for r in rows)
    # a block pass reads the weights once whatever the batch; its FLOPs grow with the batch
    b1, b2 = by["block", 1, 64], by["block", 2, 64]
    assert b2.gflop == pytest.approx(2 * b1.gflop, rel=0.01)
    assert b1.gbytes < b2.gbytes < 2 * b1.gbytes
    # a full pass over 64 positions does more work than a block pass of 8 of them
    assert by["full", 1, 64].gflop > b1.gflop and by["full", 1, 64].tokens == 64
    assert b1.bw_ms == pytest.approx(b1.gbytes / 10.0 * 1e3, rel=0.01)
    measured = pass_timing.measure_ceilings(torch.device("cpu"), torch.float32)
    assert measured.bandwidth_gbs > 0 and measured.matmul_tflops > 0


def test_bench_shape_needs_random_init() -> None:
    def bench(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "infill_engine.cli", "bench", *args],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip

    p = bench("--shape", "dream-7b")
    assert p.returncode == 2 and "add --random-init" in p.stderr
    p = bench("--random-init", "--shape", "dream-7b", "--layers", "40")
    assert p.returncode == 2 and "layers must be in 1..28" in p.stderr


def test_bench_serve_shape_options_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    from dllm_lab.bench_serve import main

    assert main(["--layers", "2"]) == 2
    assert "--layers needs --shape" in capsys.readouterr().err
    assert main(["--shape", "dream-7b", "--layers", "0"]) == 2
    assert "layers must be in 1..28" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "qk_norm", "experts"), [("coda-1.7b", True, 0), ("llada-moe-7b", True, 64)]
)
def test_new_shapes_build_at_reduced_layers(name: str, qk_norm: bool, experts: int) -> None:
    fam, args, mask_id = shape_args(name, layers=2)
    assert mask_id == fam.default_mask_id
    assert args.num_layers == 2 and args.qk_norm is qk_norm and args.num_experts == experts
    with torch.device("meta"):
        model = DiffusionTransformer(args)
    assert len(model.layers) == 2
    assert parameter_count(args) == sum(p.numel() for p in model.parameters())
    names = set(dict(model.named_parameters()))
    assert "layers.1.self_attn.q_norm.weight" in names
    assert ("layers.1.mlp.experts.63.down_proj.weight" in names) is bool(experts)
    # every parameter has a checkpoint name that the family's renames map back onto it
    assert all(fam.our_name(f"model.{n}") == n for n in names if n != "lm_head.weight")


def test_llada2_mini_builds_at_reduced_layers() -> None:
    """A dense first block and a 256-expert block; every tensor reachable from a release name."""
    fam, args, mask_id = shape_args("llada2-mini", layers=2)
    assert fam.name == "llada2" and mask_id == 156895
    assert (args.rope_dim, args.router, args.routed_scaling) == (64, "sigmoid", 2.5)
    with torch.device("meta"):
        model = DiffusionTransformer(args)
    assert parameter_count(args) == sum(p.numel() for p in model.parameters())
    shapes = {n: tuple(p.shape) for n, p in model.state_dict().items()}
    assert shapes["layers.0.mlp.up_proj.weight"] == (5120, 2048)  # dense, 5120 wide
    assert shapes["layers.1.mlp.experts.255.up_proj.weight"] == (512, 2048)
    assert shapes["layers.1.mlp.shared_experts.up_proj.weight"] == (512, 2048)
    assert shapes["layers.1.mlp.expert_bias"] == (256,)
    release = ["model.word_embeddings.weight", "model.norm.weight", "lm_head.weight"]
    for i in range(2):
        release += [
            f"model.layers.{i}.{n}"
            for n in (
                "attention.query_key_value.weight", "attention.dense.weight",
                "attention.query_layernorm.weight", "attention.key_layernorm.weight",
                "input_layernorm.weight", "post_attention_layernorm.weight",
            )
        ]  # fmt: skip
    mlps = ["model.layers.0.mlp"] + [f"model.layers.1.mlp.experts.{e}" for e in range(256)]
    mlps.append("model.layers.1.mlp.shared_experts")
    release += [f"{m}.{p}_proj.weight" for m in mlps for p in ("gate", "up", "down")]
    release += ["model.layers.1.mlp.gate.weight", "model.layers.1.mlp.gate.expert_bias"]
    ours: list[str] = []
    for key in release:
        name = fam.our_name(key)
        assert name is not None, key
        ours += [name] if name in shapes else fam.parts(name) or [name]
    assert sorted(ours) == sorted(shapes)
    assert shapes["layers.1.self_attn.k_proj.weight"] == (512, 2048)  # 4 kv heads of 128
