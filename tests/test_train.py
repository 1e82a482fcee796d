"""Training loop, corpus selection and split (infill_engine.train, infill_engine.corpus)."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import torch

from infill_engine import load
from infill_engine.corpus import SourceFile, is_held_out, iter_sources, split_corpus
from infill_engine.tokenizer_build import train_tokenizer
from infill_engine.train import Sampler, load_config, train

CODE = (
    "import os\n\n\ndef join(a, b):\n    return os.path.join(a, b)\n\n\n"
    "class Box:\n    def __init__(self, items):\n        self.items = list(items)\n\n"
    "    def size(self):\n        return len(self.items)\n"
)


def tiny_config() -> dict:
    cfg = copy.deepcopy(load_config())
    cfg["tokenizer"]["vocab_size"] = 320
    cfg["model"].update(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
    )
    cfg["train"].update(seq_len=48, batch_size=4, steps=3, minutes=2, warmup_steps=1)
    return cfg


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
    a = Sampler(files, tok, cfg, seed=7).batch(8)
    b = Sampler(files, tok, cfg, seed=7).batch(8)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.masked, b.masked)
    assert a.masked.any(1).all()  # every row scores something
    s = Sampler(files, tok, cfg, seed=3)
    ids, masked, weight, scale = s.infill()
    assert len(ids) == cfg["train"]["seq_len"] == len(scale) and weight > 0
    assert any(masked)


def test_end_padding_after_the_first_end_token_weighs_less() -> None:
    cfg = tiny_config()
    cfg["train"].update(oracle_fraction=0.0, end_pad_weight=0.25)
    files = tiny_files()
    tok = train_tokenizer((f.text for f in files), 320)
    s = Sampler(files, tok, cfg, seed=5)
    end_id = tok.token_to_id("<|endoftext|>")
    seen = 0
    for _ in range(20):
        ids, _, _, scale = s.infill()
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
    cfg["model"]["hidden_size"] = 64  # ignored: the architecture comes from the dir
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
