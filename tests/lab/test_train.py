"""Training loop, recipe, sampler, corpus selection and split (dllm_lab)."""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dllm_lab.corpus import SourceFile, is_held_out, iter_sources, split_corpus
from dllm_lab.recipe import TrainConfig
from dllm_lab.sampler import Sampler
from dllm_lab.tokenizer_build import train_tokenizer
from dllm_lab.train import PACKAGE, ar_loss, inside_package, train
from infill_engine import load
from infill_engine.loader import BUILTIN_DIR

CODE = (
    "import os\n\n\ndef join(a, b):\n    return os.path.join(a, b)\n\n\n"
    "class Box:\n    def __init__(self, items):\n        self.items = list(items)\n\n"
    "    def size(self):\n        return len(self.items)\n"
)


def tiny_config(**train: object) -> TrainConfig:
    d = TrainConfig.load().to_dict()
    d["tokenizer"]["vocab_size"] = 320
    d["model"].update(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
    )
    d["train"].update(seq_len=48, batch_size=4, steps=3, minutes=2, warmup_steps=1)
    d["train"].update(train)
    return TrainConfig.from_dict(d)


def tiny_files() -> list[SourceFile]:
    return [SourceFile(f"pkg/m{i}.py", CODE.replace("Box", f"Box{i}") * 3) for i in range(4)]


def test_tiny_train_run_writes_a_loadable_dir(tmp_path: Path) -> None:
    out = tmp_path / "model"
    meta = train(tiny_config(), out, files=tiny_files(), progress=False)
    assert meta["steps"] == 3
    assert math.isfinite(meta["loss_ema"])
    engine = load(str(out), device="cpu")
    assert engine.family == "dream"
    ids = torch.tensor([engine.encode("def f(x):\n    return x\n")])
    logits = engine.logits(ids)
    assert logits.shape == (1, ids.shape[1], engine.tokenizer.vocab_size)
    assert torch.isfinite(logits).all()


def test_sampler_is_deterministic_and_infill_spans_end_with_end_tokens() -> None:
    cfg = tiny_config()
    files = tiny_files()
    tok = train_tokenizer((f.text for f in files), 320)
    a = Sampler(files, tok, cfg.train, seed=7).batch(8)
    b = Sampler(files, tok, cfg.train, seed=7).batch(8)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.masked, b.masked)
    assert a.masked.any(1).all()  # every row scores something
    s = Sampler(files, tok, cfg.train, seed=3)
    ids, masked, weight, scale = s.infill(0.5)
    assert len(ids) == cfg.train.seq_len == len(scale) and weight > 0
    assert any(masked)


def test_end_padding_after_the_first_end_token_weighs_less() -> None:
    cfg = tiny_config(oracle_fraction=0.0, end_pad_weight=0.25, first_end_weight=1.0)
    files = tiny_files()
    tok = train_tokenizer((f.text for f in files), 320)
    s = Sampler(files, tok, cfg.train, seed=5)
    end_id = tok.token_to_id("<|endoftext|>")
    seen = 0
    for _ in range(20):
        ids, _, _, scale = s.infill(0.5)
        low = [i for i, w in enumerate(scale) if w != 1.0]
        if not low:
            continue  # the span held exactly one end token
        seen += 1
        assert all(scale[i] == 0.25 and ids[i] == end_id for i in low)
        assert ids[low[0] - 1] == end_id  # the first end token itself keeps full weight
        assert scale[low[0] - 1] == 1.0
    assert seen > 0


def test_warm_start_continues_from_a_trained_dir(tmp_path: Path) -> None:
    first = tmp_path / "first"
    train(tiny_config(), first, files=tiny_files(), progress=False)
    cfg = tiny_config()
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, hidden_size=64))
    # ^ ignored: the architecture comes from the dir
    second = tmp_path / "second"
    meta = train(cfg, second, files=tiny_files(), progress=False, init=first)
    assert meta["steps"] == 6 and [s["steps"] for s in meta["stages"]] == [3, 3]
    assert meta["config"]["model"]["hidden_size"] == 32
    a, b = load(str(first), device="cpu"), load(str(second), device="cpu")
    assert a.tokenizer.get_vocab() == b.tokenizer.get_vocab()
    wa, wb = a.model.embed_tokens.weight, b.model.embed_tokens.weight
    assert wa.shape == wb.shape and not torch.equal(wa, wb)  # it trained further


def test_split_is_deterministic_and_disjoint() -> None:
    train1, held1 = split_corpus()
    train2, held2 = split_corpus()
    assert [f.rel for f in train1] == [f.rel for f in train2]
    assert [f.rel for f in held1] == [f.rel for f in held2]
    assert held1 and train1
    assert all(is_held_out(f.rel) for f in held1)
    assert not any(is_held_out(f.rel) for f in train1)
    assert not {f.rel for f in train1} & {f.rel for f in held1}
    for f in train1:
        parts = f.rel.split("/")
        assert "test" not in parts[:-1] and "site-packages" not in parts
        assert "humaneval" not in f.text.lower()


def test_selection_skips_tests_and_humaneval(tmp_path: Path) -> None:
    body = "x = 1\n" * 50
    for rel, text in {
        "a.py": body,
        "test/b.py": body,
        "pkg/tests/c.py": body,
        "pkg/test_d.py": body,
        "e.py": body + "# HumanEval/1\n",
        "site-packages/f.py": body,
        "g.py": body,
    }.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    assert [f.rel for f in iter_sources(tmp_path)] == ["a.py", "g.py"]


def test_mask_levels_are_stratified_across_the_batch() -> None:
    files = tiny_files()
    tok = train_tokenizer((f.text for f in files), 320)
    s = Sampler(files, tok, tiny_config().train, seed=11)
    for size in (1, 7, 16):
        levels = sorted(s.mask_levels(size))
        # one level in each stratum [i/size, (i+1)/size): no batch is all small-t rows
        assert all(i / size <= t < (i + 1) / size or t == 1e-3 for i, t in enumerate(levels))
    # the offset is random, so two batches differ
    assert s.mask_levels(16) != s.mask_levels(16)
    iid = Sampler(files, tok, tiny_config(stratified_t=False).train, seed=11)
    levels = sorted(iid.mask_levels(64))
    assert not all(i / 64 <= t < (i + 1) / 64 for i, t in enumerate(levels))


def test_ar_loss_is_next_token_prediction_under_a_causal_mask() -> None:
    torch.manual_seed(0)
    files = tiny_files()
    tok = train_tokenizer((f.text for f in files), 320)
    from dllm_lab.checkpoint import build_model

    model = build_model(tiny_config().model, tok).eval()
    ids = torch.randint(4, 320, (2, 12))
    t = ids.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    pos = torch.arange(t).expand(2, -1)
    raw = model(ids, pos, mask=causal)
    want = torch.nn.functional.cross_entropy(raw[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    assert torch.allclose(ar_loss(model, ids), want)
    # causal: changing the last token leaves every earlier position's logits unchanged
    other = ids.clone()
    other[:, -1] = (other[:, -1] + 1) % 320
    raw2 = model(other, pos, mask=causal)
    assert torch.allclose(raw[:, :-1], raw2[:, :-1], atol=1e-5)
    assert not torch.allclose(raw[:, -1], raw2[:, -1])


def test_ar_then_diffusion_stages_are_recorded(tmp_path: Path) -> None:
    ar_dir, diff_dir = tmp_path / "ar", tmp_path / "diff"
    train(tiny_config(objective="ar"), ar_dir, files=tiny_files(), progress=False)
    meta = train(tiny_config(), diff_dir, files=tiny_files(), progress=False, init=ar_dir)
    assert [s["objective"] for s in meta["stages"]] == ["ar", "diffusion"]
    config = (diff_dir / "config.json").read_text()
    assert '"expand_token_id": 2' in config and '"delete_token_id": 3' in config
    engine = load(str(diff_dir), device="cpu")
    assert engine.tokenizer.convert_ids_to_tokens([2, 3]) == ["<|expand|>", "<|delete|>"]


def test_recipe_rejects_unknown_keys_and_bad_values() -> None:
    d = TrainConfig.load().to_dict()
    assert TrainConfig.from_dict(d) == TrainConfig.load()
    with pytest.raises(ValueError, match="unknown keys"):
        TrainConfig.from_dict({**d, "train": {**d["train"], "lr_typo": 1.0}})
    with pytest.raises(ValueError, match="objective"):
        TrainConfig.load().with_train(objective="gan")
    with pytest.raises(ValueError, match="infill_fraction"):
        TrainConfig.load().with_train(infill_fraction=1.5)


def test_warm_start_rejects_a_foreign_dir(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="training_meta"):
        train(tiny_config(), tmp_path / "x", files=tiny_files(), progress=False, init=tmp_path)


def test_site_packages_source_dedups_and_never_leaks_held_out_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dllm_lab import corpus

    std, site = tmp_path / "std", tmp_path / "site"
    texts = {f"m{i}.py": f"x{i} = {i}\n" * 60 for i in range(200)}
    for rel, text in texts.items():
        (std / rel).parent.mkdir(parents=True, exist_ok=True)
        (std / rel).write_text(text)
    held_rel = next(r for r in texts if is_held_out(r))
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "copy.py").write_text(texts[held_rel])  # a held-out file, vendored
    (site / "pkg" / "dup.py").write_text(texts["m0.py" if held_rel != "m0.py" else "m1.py"])
    (site / "pkg" / "own.py").write_text("def own():\n    return 1\n" * 20)
    (site / "pkg" / "data.py").write_text("T = [" + "1, " * 3000 + "]\n")  # generated-looking
    monkeypatch.setattr(corpus, "stdlib_root", lambda: std)
    monkeypatch.setattr(corpus, "site_packages_root", lambda: site)
    train_files, held = split_corpus(sources=("stdlib", "site-packages"))
    rels = {f.rel for f in train_files}
    assert held_rel in {f.rel for f in held}
    assert "site-packages/pkg/own.py" in rels
    assert not rels & {"site-packages/pkg/copy.py", "site-packages/pkg/dup.py"}
    assert "site-packages/pkg/data.py" not in rels
    assert len({f.text for f in train_files}) == len(train_files)
    with pytest.raises(ValueError, match="unknown corpus sources"):
        split_corpus(sources=("pypi",))


def test_row_mix_and_loss_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    files = tiny_files()
    tok = train_tokenizer((f.text for f in files), 320)
    levels = [0.25, 0.5, 0.75, 1.0]
    n = tiny_config().train.seq_len
    # masked-diffusion rows only: weight 1/(t n), masks anywhere in the row
    s = Sampler(files, tok, tiny_config(infill_fraction=0.0).train, seed=2)
    monkeypatch.setattr(s, "mask_levels", lambda size: levels[:size])
    b = s.batch(4)
    assert torch.allclose(b.weight, torch.tensor([1 / (t * n) for t in levels]))
    # infill rows only: weight 1/(t span), masks only inside one span of that length
    s = Sampler(files, tok, tiny_config(infill_fraction=1.0).train, seed=2)
    monkeypatch.setattr(s, "mask_levels", lambda size: levels[:size])
    b = s.batch(4)
    for t, w, masked in zip(levels, b.weight.tolist(), b.masked, strict=True):
        span = round(1 / (w * t))
        where = masked.nonzero().flatten()
        assert 1 <= span <= tiny_config().train.max_span
        assert int(where.max() - where.min()) < span
    # the loss is the weighted sum over masked positions only
    from dllm_lab.checkpoint import build_model
    from dllm_lab.train import diffusion_loss, shifted_logits

    torch.manual_seed(0)
    model = build_model(tiny_config().model, tok)
    logits = shifted_logits(model, b.ids)
    ce = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), b.targets.flatten(), reduction="none"
    ).view_as(b.targets)
    assert b.scale is not None
    want = ((ce * b.masked * b.scale).sum(1) * b.weight).mean()
    assert torch.allclose(diffusion_loss(model, b), want)


@pytest.mark.parametrize("objective", ["ar", "diffusion"])
def test_the_loss_goes_down_on_a_tiny_run(tmp_path: Path, objective: str) -> None:
    files = tiny_files()
    short = train(tiny_config(objective=objective, steps=1), tmp_path / "a", files=files,
                  progress=False)  # fmt: skip
    long = train(tiny_config(objective=objective, steps=80, lr=5e-3), tmp_path / "b",
                 files=files, progress=False)  # fmt: skip
    assert long["loss_ema"] < short["loss_ema"] - 0.5


def test_a_masked_boundary_hides_the_end_run_and_weighs_more() -> None:
    files = tiny_files()
    tok = train_tokenizer((f.text for f in files), 320)
    end_id = tok.token_to_id("<|endoftext|>")
    cfg = tiny_config(oracle_fraction=0.0, mask_end_run=True, first_end_weight=3.0)
    s = Sampler(files, tok, cfg.train, seed=4)
    seen = 0
    for _ in range(40):
        ids, masked, _, scale = s.infill(0.3)
        heavy = [i for i, w in enumerate(scale) if w == 3.0]
        if not heavy:
            continue
        (first,) = heavy
        assert ids[first] == end_id and ids[first - 1] != end_id
        run = range(first, first + 1 + sum(1 for w in scale[first + 1 :] if w != 1.0))
        if masked[first]:
            seen += 1
            assert all(masked[i] for i in run)  # no visible end token gives the boundary away
    assert seen > 0


def test_expand_rows_merge_pairs_into_masked_expand_targets() -> None:
    """DreamOn's objective: a span too short for the middle holds one masked <|expand|> per merged
    pair, and decoding each expand as two tokens gives back the true middle."""
    files = tiny_files()
    tok = train_tokenizer((f.text for f in files), 320)
    expand_id = tok.token_to_id("<|expand|>")
    end_id = tok.token_to_id("<|endoftext|>")
    cfg = tiny_config(expand_fraction=1.0, oracle_fraction=0.0)
    s = Sampler(files, tok, cfg.train, seed=11)
    seen = 0
    for _ in range(30):
        mid = list(range(10, 10 + s.rng.randint(2, 30)))
        short, at = s._merge_pairs(mid)
        assert at and all(short[i] == expand_id for i in at)
        assert len(short) == len(mid) - len(at)
        restored: list[int] = []
        it = iter(mid)
        for t in short:
            restored += [next(it), next(it)] if t == expand_id else [next(it)]
        assert restored == mid
        ids, masked, _, _ = s.infill(0.2)
        where = [i for i, t in enumerate(ids) if t == expand_id]
        seen += bool(where)
        assert all(masked[i] for i in where)  # never visible
        assert end_id not in ids[where[0] : where[-1]] if where else True
    assert seen > 0
    with pytest.raises(ValueError, match="expand_fraction"):
        tiny_config(expand_fraction=1.5)


def train_cli(*args: str) -> subprocess.CompletedProcess[str]:
    root = PACKAGE.parent
    return subprocess.run(
        [sys.executable, "-m", "infill_engine.cli", "train", *args],
        capture_output=True, text=True, timeout=120, cwd=root,
    )  # fmt: skip


def test_train_never_writes_into_the_package_unless_asked(tmp_path: Path) -> None:
    """--out once defaulted to the shipped model's directory: the README's AR example replaced
    the diffusion model with an AR-only stage. Now --out is required, and a directory inside
    the package needs --overwrite-builtin; both are refused before any corpus is read."""
    weights = BUILTIN_DIR / "model.safetensors"
    before = weights.stat().st_mtime_ns
    p = train_cli("--objective", "ar", "--minutes", "60")
    assert p.returncode == 2 and "--out" in p.stderr, p.stderr
    p = train_cli("--objective", "ar", "--out", "infill_engine/assets/builtin")
    assert p.returncode == 2 and "--overwrite-builtin" in p.stderr and "Traceback" not in p.stderr
    assert weights.stat().st_mtime_ns == before
    link = tmp_path / "looks-elsewhere"
    link.symlink_to(BUILTIN_DIR)
    assert inside_package(link) and inside_package(PACKAGE / "assets" / "new")
    assert not inside_package(tmp_path / "model")


def test_a_short_train_run_shows_its_own_time_left(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A million steps asked and a 4-second budget: the bar's time left is seconds, not the
    million steps' hours."""
    budget_s = 4.0
    cfg = tiny_config(seq_len=32, batch_size=2, steps=1_000_000, minutes=budget_s / 60)
    code = "def area(w, h):\n    return w * h\n\n\nclass Box:\n    pass\n" * 4
    files = [SourceFile(f"pkg/m{i}.py", code.replace("Box", f"Box{i}")) for i in range(4)]
    train(cfg, tmp_path / "m", files=files, progress=True)
    err = capfd.readouterr().err
    left = [int(m) * 60 + int(s) for m, s in re.findall(r"left=(\d+):(\d\d)", err)]
    assert left and max(left) <= budget_s + 1, err[-2000:]
