"""The prepared accelerator run (dllm_lab.gpu_run), end to end on the CPU at toy scale."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from tokenizers import Tokenizer

from dllm_lab.checkpoint import build_model, save_model
from dllm_lab.corpus import (
    VENDOR_DIR_NAMES,
    SourceFile,
    is_held_out,
    site_packages_roots,
    split_corpus,
    stdlib_root,
)
from dllm_lab.gpu_run import (
    BUILTIN,
    SHARD_BYTES,
    Run,
    build_corpus,
    config_for,
    parse_args,
    tokenize_parallel,
    train_stage,
)
from dllm_lab.recipe import CorpusSpec, TrainConfig
from dllm_lab.sampler import Sampler
from dllm_lab.train import ar_loss, diffusion_loss
from infill_engine import load
from infill_engine.params import InfillParams

MIB16 = 16 * 2**20
TOY = [
    "--device", "cpu", "--minutes", "0.5", "--max-files", "300", "--workers", "2",
    "--hidden", "64", "--layers", "2", "--heads", "2", "--kv-heads", "1", "--mlp", "128",
    "--seq-len", "128", "--checkpoint-minutes", "0.05", "--log-every", "1",
]  # fmt: skip
# Timed stages: on a loaded machine a stage may get a few steps only (each gets one at least),
# so every step is logged; the fixed-step test below judges the training.


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu_run") / "model"
    cmd = [sys.executable, "-m", "dllm_lab.gpu_run", "--out", str(out), *TOY]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[ar] step 1  loss" in done.stdout and "[diffusion] step 1  loss" in done.stdout
    return out


def meta_of(d: Path) -> dict[str, Any]:
    return dict(json.loads((d / "training_meta.json").read_text()))


def test_manifest_records_the_corpus(run_dir: Path) -> None:
    m = meta_of(run_dir)["corpus_manifest"]
    assert m["files"] == 300 and m["bytes"] > 100_000 and m["tokens"] > 20_000
    packages = m["packages"]
    assert sum(p["files"] for p in packages.values()) == 300
    assert sum(p["tokens"] for p in packages.values()) == m["tokens"]
    assert packages["stdlib"]["versions"] == {"python": m["python"]}
    site = [p for name, p in packages.items() if name != "stdlib"]
    assert any(v for p in site for v in p["versions"].values())  # installed versions read
    listed = (run_dir / "corpus.txt").read_text().splitlines()
    assert len(listed) == 300 and any(r.startswith("site-packages/") for r in listed)


def test_held_out_and_vendored_files_stay_out(run_dir: Path) -> None:
    listed = set((run_dir / "corpus.txt").read_text().splitlines())
    stdlib = stdlib_root()
    held = {p.relative_to(stdlib).as_posix() for p in stdlib.rglob("*.py")}
    held = {r for r in held if is_held_out(r)}
    assert held and not held & listed
    assert not any(is_held_out(r) for r in listed)
    assert not any(set(r.split("/")) & VENDOR_DIR_NAMES for r in listed)


def test_full_corpus_has_no_vendored_trees_and_a_version_free_split() -> None:
    vendored = [
        p
        for root in site_packages_roots()
        for name in VENDOR_DIR_NAMES
        for p in root.glob(f"*/{name}")
    ]
    assert vendored, "this installation should hold a vendored tree (pip/_vendor) to test with"
    files, held = build_corpus(CorpusSpec(package_mb=24.0))
    assert not any(set(f.rel.split("/")) & VENDOR_DIR_NAMES for f in files)
    assert held and all(not f.rel.startswith(("python", "/")) for f in held)
    assert [f.rel for f in held] == [f.rel for f in split_corpus()[1]]  # the evaluation set


def test_a_checkpoint_after_each_stage_every_file_under_16_mib(run_dir: Path) -> None:
    meta = meta_of(run_dir)
    reasons = [c["reason"] for c in meta["checkpoints"]]
    assert "end of ar" in reasons and reasons[-1] == "end of diffusion"
    assert any(r.startswith("diffusion step") for r in reasons)  # time-based, mid-stage
    assert [s["objective"] for s in meta["stages"]] == ["ar", "diffusion"]
    assert all(s["steps"] > 0 and s["tokens_per_s"] > 0 for s in meta["stages"])
    assert {p["stage"] for p in meta["curve"]} == {"ar", "diffusion"}
    for d in (run_dir, run_dir / "ar"):
        assert (d / "model.safetensors.index.json").is_file()
        assert all(f.stat().st_size < MIB16 for f in d.iterdir() if f.is_file())
    assert meta_of(run_dir / "ar")["stages"][-1]["objective"] == "ar"


def test_each_stage_moved_the_weights(run_dir: Path) -> None:
    """The AR stage moved the weights off their initialisation (its RMSNorm scales start at
    exactly 1), and the diffusion stage moved them off the AR stage's."""
    ar, final = (load(str(d), device="cpu").model.state_dict() for d in (run_dir / "ar", run_dir))
    norms = [k for k in ar if k.endswith("norm.weight")]
    assert norms and all(not torch.all(ar[k] == 1.0) for k in norms)
    assert ar.keys() == final.keys()
    assert all(not torch.equal(ar[k], final[k]) for k in ar)


def held_loss(model: Any, rows: Any) -> float:
    """The stage's loss on fixed rows: AR rows are a tensor of ids, diffusion rows a Batch."""
    with torch.no_grad():
        out = (
            ar_loss(model, rows) if isinstance(rows, torch.Tensor) else diffusion_loss(model, rows)
        )
    return float(out)


def test_each_stage_lowers_its_loss_on_held_rows(tmp_path: Path) -> None:
    """A fixed number of steps per stage (the end-to-end run's count depends on the machine's
    speed): each stage's own loss, on rows it never trained on, falls, and every weight moves."""
    root = stdlib_root()
    names = ["json/decoder.py", "json/encoder.py", "textwrap.py", "shlex.py", "string.py"]
    files = [SourceFile(n, (root / n).read_text()) for n in names]
    tok = Tokenizer.from_file(str(BUILTIN / "tokenizer.json"))
    ids, manifest = tokenize_parallel(files, BUILTIN / "tokenizer.json", workers=0)
    small = ["--hidden", "64", "--layers", "2", "--heads", "2", "--kv-heads", "1", "--mlp", "128"]
    argv = ["--out", str(tmp_path), "--device", "cpu", *small, "--seq-len", "64"]
    cfg = config_for(parse_args([*argv, "--batch-size", "4"]), cuda=False)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, tok)
    run = Run(tmp_path, torch.device("cpu"), tok, manifest, SHARD_BYTES, 1e9, log_every=5)
    for objective, lr in (("ar", 2e-3), ("diffusion", 1e-3)):
        stage = cfg.with_train(objective=objective, lr=lr, steps=12, warmup_steps=4)
        sampler = Sampler(files, tok, stage.train, seed=99, token_ids=ids)  # not the stage's seed
        held = sampler.ar_batch(32) if objective == "ar" else sampler.batch(32)

        before, weights = (
            held_loss(model, held),
            {k: v.clone() for k, v in model.state_dict().items()},
        )
        train_stage(run, model, stage, files, ids, seconds=600.0, workers=0)
        assert run.stages[-1]["steps"] == 12
        after = held_loss(model, held)
        assert after < before - 0.1, (objective, before, after)
        assert all(not torch.equal(weights[k], v) for k, v in model.state_dict().items())


def test_the_result_loads_and_fills_a_hole(run_dir: Path) -> None:
    for d in (run_dir, run_dir / "ar"):
        engine = load(str(d), device="cpu")
        res = engine.infill("def add(a, b):\n    ", "\n\nprint(add(1, 2))\n", InfillParams(span=8))
        assert isinstance(res.text, str) and res.nfe_full + res.nfe_block >= 1


def test_shards_load_like_one_file(tmp_path: Path) -> None:
    tok = Tokenizer.from_file(str(BUILTIN / "tokenizer.json"))
    cfg = TrainConfig.load()
    net = build_model(cfg.model, tok).eval()
    save_model(net, tok, cfg, tmp_path / "one", {"config": cfg.to_dict()})
    save_model(net, tok, cfg, tmp_path / "many", {"config": cfg.to_dict()}, shard_bytes=3 * 2**20)
    shards = sorted((tmp_path / "many").glob("model-*-of-*.safetensors"))
    assert len(shards) >= 3 and all(s.stat().st_size <= 3 * 2**20 + 2**16 for s in shards)
    assert not (tmp_path / "many" / "model.safetensors").exists()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    a, b = (load(str(tmp_path / d), device="cpu").logits(ids) for d in ("one", "many"))
    assert torch.equal(a, b)


def test_repository_rows_open_with_the_servers_chunk_headers() -> None:
    tok = Tokenizer.from_file(str(BUILTIN / "tokenizer.json"))
    body = "def helper_{i}(x):\n    return x + {i}\n\n\n"
    files = [
        SourceFile(f"site-packages/pkg/mod{i}.py", "".join(body.format(i=i) for _ in range(20)))
        for i in range(3)
    ]
    sched = TrainConfig.load().train
    s = Sampler(files, tok, sched.__class__(seq_len=256, repo_fraction=1.0), seed=1)
    text = tok.decode(s.plain())
    assert text.startswith("# pkg/mod")  # chunk_text's header, without the corpus root
    first = text.split("\n", 1)[0]
    assert first.removeprefix("# ") in {f"pkg/mod{i}.py" for i in range(3)}
    plain = Sampler(files, tok, sched.__class__(seq_len=256, repo_fraction=0.0), seed=1)
    assert not tok.decode(plain.plain()).startswith("# ")


def test_copy_rows_cut_a_line_that_stands_elsewhere_in_the_window() -> None:
    tok = Tokenizer.from_file(str(BUILTIN / "tokenizer.json"))
    lines = [f"    value_{i} = compute(value_{i - 1})\n" for i in range(1, 40)]
    lines[30] = lines[5]  # one line twice
    files = [SourceFile("site-packages/pkg/mod.py", "def f():\n" + "".join(lines))]
    sched = TrainConfig.load().train.__class__(seq_len=512, copy_fraction=1.0)
    s = Sampler(files, tok, sched, seed=3)
    text = files[0].text
    for _ in range(10):
        a, b = s._cut(text)
        assert text[a:b] == lines[5]
    plain = Sampler(files, tok, sched.__class__(seq_len=512, copy_fraction=0.0), seed=3)
    assert any(text[slice(*plain._cut(text))] != lines[5] for _ in range(10))
    with pytest.raises(ValueError, match="copy_fraction"):
        sched.__class__(copy_fraction=1.5)
