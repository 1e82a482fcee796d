"""DreamOn conventions from a model directory of its own: expand and delete through the planner.

DreamOn-v0-7B is a Dream checkpoint (model_type "Dream") whose tokenizer adds `<|expand|>`
(151667) and no delete token: its generator deletes an end token committed inside the middle.
The tiny directory here has the same shape: a Dream checkpoint, a tokenizer with `<|expand|>`,
no `<|delete|>`, and no expand/delete ids in config.json, so every id comes from the directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import EOS_ID, TEXT, VOCAB, biased, make_dream

from infill_engine import InfillParams, load, planner
from infill_engine.engine import Engine

EXPAND = "<|expand|>"
DOC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return \n"
OFFSET = DOC.index("return \n") + len("return ")


def write_dreamon_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<|endoftext|>", "<|mask|>", EXPAND],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([TEXT] * 4, trainer)
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "eos_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>",
                "mask_token": "<|mask|>",
                "additional_special_tokens": [EXPAND],
            }
        )
    )


@pytest.fixture(scope="module")
def dreamon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    path = tmp_path_factory.mktemp("dreamon")
    make_dream(path)
    write_dreamon_tokenizer(path)  # replaces the plain tokenizer make_dream wrote
    engine = load(str(path), device="cpu")
    yield engine
    engine.close()


def plan_for(engine: Engine, start: int = OFFSET, end: int | None = None) -> planner.SpanPlan:
    """The planner's plan for the hole at `start` (a selection up to `end`)."""
    return planner.plan(
        DOC, start, "python", engine.encode, end=end, max_positions=engine.args.max_positions
    )


def infill(  # type: ignore[no-untyped-def]
    engine: Engine, plan: planner.SpanPlan, expand: bool, start: int = OFFSET, end: int = OFFSET
):
    params = InfillParams(span="auto", max_span=plan.max_span, expand=expand)
    return engine.infill(DOC[:start], DOC[max(start, end) :], params, plan=plan)


def test_ids_come_from_the_directory(dreamon: Engine) -> None:
    expand_id = dreamon.tokenizer.convert_tokens_to_ids(EXPAND)
    assert dreamon.family == "dream"
    assert (dreamon.expand_id, dreamon.delete_id) == (expand_id, EOS_ID)
    # expand is never text; the end token that deletes stays an end token
    assert expand_id in dreamon.reserved_ids and EOS_ID not in dreamon.reserved_ids
    assert EOS_ID in dreamon.end_ids


def test_expand_grows_the_planned_span(dreamon: Engine) -> None:
    plan = plan_for(dreamon)
    assert plan.max_span > plan.span
    expand_id = int(dreamon.expand_id)  # type: ignore[arg-type]
    old = biased(dreamon, expand_id, 8.0)
    try:
        grown = infill(dreamon, plan, expand=True)
        fixed = infill(dreamon, plan, expand=False)
    finally:
        dreamon.model.lm_head = old
    assert grown.span > plan.span and grown.edits >= grown.span - plan.span
    assert expand_id not in grown.token_ids
    assert fixed.edits == 0 and expand_id not in fixed.token_ids


def test_an_end_token_inside_the_middle_deletes_its_position(dreamon: Engine) -> None:
    """A selection to rewrite (no construct to keep open): a model that wants every position
    gone deletes them all; asked for a fixed length, the same end token ends the fill."""
    start = DOC.rindex("return")
    end = start + len("return")  # the selection: the last "return"
    plan = plan_for(dreamon, start, end)
    assert plan.kind == "selection" and plan.span > 0
    old = biased(dreamon, EOS_ID, 50.0)
    try:
        shrunk = infill(dreamon, plan, expand=True, start=start, end=end)
        ended = infill(dreamon, plan, expand=False, start=start, end=end)
    finally:
        dreamon.model.lm_head = old
    assert shrunk.span == 0 and shrunk.edits == plan.span and shrunk.text == ""
    assert ended.stop_reason == "end_token" and ended.edits == 0 and ended.text == ""


def test_deletes_against_an_open_construct_end(dreamon: Engine) -> None:
    """The planner keeps growing a line that is still open while the model deletes every
    position: past the churn bound (2 * max_span edits) the end token ends the span instead of
    trading places with growth forever."""
    plan = plan_for(dreamon)
    assert plan.kind == "line"
    old = biased(dreamon, EOS_ID, 50.0)
    try:
        r = infill(dreamon, plan, expand=True)
    finally:
        dreamon.model.lm_head = old
    assert r.stop_reason == "end_token" and r.text == ""
    assert 2 * plan.max_span <= r.edits <= 2 * plan.max_span + 32


def test_builtin_keeps_its_own_delete_token() -> None:
    engine = load("builtin", device="cpu")
    try:
        vocab = engine.tokenizer.get_vocab()
        assert engine.delete_id == vocab["<|delete|>"] and engine.expand_id == vocab[EXPAND]
        assert engine.delete_id not in engine.end_ids
    finally:
        engine.close()


def test_the_biased_head_is_put_back(dreamon: Engine) -> None:
    """The fixture engine is shared: the tests above restore its head."""
    assert dreamon.model.lm_head.bias is None
    ids = torch.randint(3, VOCAB, (1, 8), generator=torch.Generator().manual_seed(7))
    assert torch.isfinite(dreamon.logits(ids)).all()
