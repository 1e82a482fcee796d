"""Clear errors for bad model directories and bad parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import make_dream
from safetensors.torch import load_file, save_file

from infill_engine import InfillParams, InfillRequest, ModelLoadError, load


def with_model_type(path: Path, model_type: str) -> Path:
    make_dream(path)
    cfg = json.loads((path / "config.json").read_text())
    cfg["model_type"] = model_type
    (path / "config.json").write_text(json.dumps(cfg))
    return path


def test_unknown_model_type(tmp_path: Path) -> None:
    with_model_type(tmp_path, "gpt2")
    with pytest.raises(ModelLoadError, match="unknown model_type 'gpt2'"):
        load(str(tmp_path), device="cpu")


def test_qwen2_needs_an_explicit_diffusion_reading(tmp_path: Path) -> None:
    with_model_type(tmp_path, "qwen2")
    with pytest.raises(ModelLoadError, match="qwen2_as_diffusion"):
        load(str(tmp_path), device="cpu")
    engine = load(str(tmp_path), device="cpu", qwen2_as_diffusion=True)
    assert engine.family == "qwen2-diffusion" and engine.args.logits_shift == 1


def test_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no such directory"):
        load(str(tmp_path / "nope"), device="cpu")
    tmp_path.joinpath("m").mkdir()
    with pytest.raises(ModelLoadError, match=r"missing config\.json"):
        load(str(tmp_path / "m"), device="cpu")
    make_dream(tmp_path / "w")
    (tmp_path / "w" / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"missing model\.safetensors"):
        load(str(tmp_path / "w"), device="cpu")


def test_missing_shard(tmp_path: Path) -> None:
    make_dream(tmp_path, shards=2)
    next(tmp_path.glob("model-00002-*.safetensors")).unlink()
    with pytest.raises(ModelLoadError, match="missing shard"):
        load(str(tmp_path), device="cpu")


def test_wrong_shape_names_the_key(tmp_path: Path) -> None:
    make_dream(tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    key = "model.layers.1.self_attn.k_proj.weight"
    state[key] = torch.zeros(7, 64)
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(ModelLoadError, match=r"'model\.layers\.1\.self_attn\.k_proj\.weight'"):
        load(str(tmp_path), device="cpu")


def test_missing_tensor_is_named(tmp_path: Path) -> None:
    make_dream(tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    del state["model.norm.weight"]
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(ModelLoadError, match=r"missing, e\.g\. norm\.weight"):
        load(str(tmp_path), device="cpu")


def test_pickle_weights_are_refused(tmp_path: Path) -> None:
    make_dream(tmp_path)
    (tmp_path / "model.safetensors").rename(tmp_path / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="only safetensors"):
        load(str(tmp_path), device="cpu")


def test_bad_json(tmp_path: Path) -> None:
    make_dream(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        load(str(tmp_path), device="cpu")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"span": 0}, "span must be"),
        ({"span": 600}, "exceeds max_span"),
        ({"decode": "beam"}, "decode must be"),
        ({"cache": "paged"}, "cache must be"),
        ({"top_p": 0.0}, "top_p"),
        ({"temperature": -1.0}, "temperature"),
        ({"block_size": 0}, "block_size"),
        ({"min_tokens": -1}, "min_tokens"),
        ({"span": 4, "min_tokens": 5}, "min_tokens"),
    ],
)
def test_params_validate(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        InfillParams(**kwargs)  # type: ignore[arg-type]


def test_generation_config_threshold_is_the_default_tau(tmp_path: Path) -> None:
    make_dream(tmp_path)
    assert load(str(tmp_path), device="cpu").threshold == 0.9  # none recommended
    (tmp_path / "generation_config.json").write_text(json.dumps({"threshold": 1e-6}))
    engine = load(str(tmp_path), device="cpu")
    assert engine.threshold == 1e-6
    prefix, suffix = tuple(engine.encode("def add(a, b):\n")), tuple(engine.encode("\n"))
    # τ ~ 0 commits every position of a block in one step; an explicit τ = 1.0 one per step
    model_default = InfillParams(span=8, block_size=8, cache="none")
    explicit = InfillParams(span=8, block_size=8, cache="none", threshold=1.0)
    fast, slow = engine.run(
        [InfillRequest(prefix, suffix, 8, p) for p in (model_default, explicit)]
    )
    assert fast.nfe == 1 and slow.nfe == 8
    for bad in ("0", "1.5", "true", "{"):
        (tmp_path / "generation_config.json").write_text(
            bad if bad == "{" else json.dumps({"threshold": json.loads(bad)})
        )
        with pytest.raises(ModelLoadError, match=r"generation_config\.json"):
            load(str(tmp_path), device="cpu")


def test_dreamon_control_tokens_in_config_are_reserved(tmp_path: Path) -> None:
    make_dream(tmp_path)
    assert load(str(tmp_path), device="cpu").reserved_ids == ()
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.update(expand_token_id=2, delete_token_id=3)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    engine = load(str(tmp_path), device="cpu")
    assert engine.reserved_ids == (2, 3)
    assert load("builtin", device="cpu").reserved_ids == (2, 3)


def test_llada_counts_its_end_of_turn_token_as_an_end() -> None:
    from infill_engine.loader import special_ids
    from infill_engine.models.llada import LLADA

    mask, ends = special_ids({"eos_token_id": 126081}, LLADA, None, 126464)
    assert mask == 126336 and set(ends) == {126081, 126348}
    # an id outside the vocabulary is dropped, never used
    _, small = special_ids({"eos_token_id": 5, "mask_token_id": 1}, LLADA, None, 320)
    assert small == (5,)


def test_device_auto_picks_cuda_only_when_present() -> None:
    from infill_engine import pick_device

    dev, dtype = pick_device("auto")
    if torch.cuda.is_available():
        assert dev.type == "cuda" and dtype == torch.bfloat16
    else:
        assert dev.type == "cpu" and dtype == torch.float32
        with pytest.raises(ValueError, match="CUDA is not available"):
            pick_device("cuda")
