"""A span whose length moves: the construct's stop rule, growth while the construct is open, and
DreamOn's expand/delete decoding, with the K/V cache exact across every move."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from block_loop import decode_rows
from conftest import MASK_ID, biased

from infill_engine import Engine, InfillParams, InfillRequest
from infill_engine.runner import Row
from infill_engine.stop import StopRule

PREFIX = "def add(a, b):\n    return"
SUFFIX = "\n\nclass Point:\n"


def rows_for(engine: Engine, span: int, params: InfillParams, **kw: object) -> Row:
    req = engine.request(PREFIX, SUFFIX, replace(params, span=span))
    return engine.rows.row(replace(req, **kw))  # type: ignore[arg-type]


# -- the stop rule, on text ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("rule", "text", "cut"),
    [
        (StopRule("line"), "x = f(a,\n  b)\nmore", 13),  # a newline inside brackets goes on
        (StopRule("line"), "return ')' + x", None),  # brackets in strings do not count
        (StopRule("line"), "x = 1  # (\ny", 10),  # nor in comments
        (StopRule("expression"), "a, g(b)) + 1", 7),  # the closer of the bracket it is in
        (StopRule("brace", comment="//"), "\n    return 1;\n}\nint g() {", 14),
        (StopRule("indent", indent=4), "\n    x = 1\n\n    y = 2\n\ndef g():", 21),
        (StopRule("indent", indent=4), "\n    x = 1\n    if x:\n        y", None),
        (StopRule("indent", indent=4), "\n    x = 1\n", None),  # no dedent seen yet
        (StopRule("none"), "a\n}\n", None),
        # a statement that opens a block ends with its block; one inserted keeps its newline
        (StopRule("line", opener=":"), "if x:\n    y = 1\n    z = 2\nw = 3", 25),
        (StopRule("line", opener=":", newline=True), "if x:\n    y = 1\n    z = 2\nw", 26),
        (StopRule("line", opener=":"), "if x:\n    y = 1\n", None),
        (StopRule("line", opener=":"), "x = 1  # note:\ny", 14),
        (StopRule("line", newline=True), "x = 1\ny", 6),
        (StopRule("line", statement=True), "\n  \n    x = 1\ny", 13),  # blank lines first
        (StopRule("line", statement=True), "\n   ", None),
        (StopRule("line"), "\n    x = 1\n", 0),  # the rest of a line: a newline ends it
    ],
)
def test_stop_rule_finds_the_end_of_the_construct(rule: StopRule, text: str, cut: int) -> None:
    assert rule.cut(text) == cut


@pytest.mark.parametrize("kind", ["line", "expression", "brace"])
def test_a_language_with_no_line_comment_scans_to_the_end(kind: str) -> None:
    # An empty comment mark once matched at every position: the scan stood still on the first
    # newline for ever, on the scheduler's worker, under the engine lock.
    rule = StopRule(kind, comment="")  # type: ignore[arg-type]
    text = "x = (1,\n 2)) + 3\n}\ny = 2\n" * 50
    assert rule.cut(text) == StopRule(kind, comment="@@").cut(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "word"),
    [
        ({"kind": "sentence"}, "kind"),
        ({"kind": "line", "comment": "\n"}, "comment"),
        ({"kind": "line", "comment": "# "}, "comment"),
        ({"kind": "line", "comment": "#" * 9}, "comment"),
        ({"kind": "line", "comment": 3}, "comment"),
        ({"kind": "line", "opener": "\t"}, "opener"),
        ({"kind": "indent", "indent": -1}, "indent"),
        ({"kind": "indent", "indent": True}, "indent"),
        ({"kind": "indent", "indent": 1 << 20}, "indent"),
        ({"kind": "line", "newline": 1}, "booleans"),
        ({"kind": "line", "statement": "yes"}, "booleans"),
    ],
)
def test_a_stop_rule_checks_itself_when_built(fields: dict[str, object], word: str) -> None:
    with pytest.raises(ValueError, match=word):
        StopRule(**fields)  # type: ignore[arg-type]


def test_an_inserted_statement_closes_with_its_newline() -> None:
    rule = StopRule("line", newline=True, statement=True)
    assert rule.close("x = 1") == "x = 1\n"  # ended by an end token before its newline
    assert rule.close("x = 1\n") == "x = 1\n"
    assert rule.close("      ") == ""  # indentation alone is no statement
    assert StopRule("line").close("x = 1") == "x = 1"  # the rest of a line: as it is


def test_the_engine_keeps_the_ids_whose_text_reaches_the_cut(dream_engine: Engine) -> None:
    keep = dream_engine.rows.stop_fn(StopRule("line"))
    ids = dream_engine.encode("a + b\nreturn x")
    k = keep(ids)
    assert k is not None
    assert dream_engine.decode_ids(ids[:k]) == "a + b"  # the fewest ids that reach the newline
    assert len(dream_engine.decode_ids(ids[: k - 1])) < 5
    assert keep(dream_engine.encode("a + b")) is None


# -- the block loop ---------------------------------------------------------------------------
def test_stop_rule_ends_the_span_and_no_pass_runs_after(dream_engine: Engine) -> None:
    params = InfillParams(span=32, block_size=8, threshold=2.0)  # one token per step
    row = rows_for(dream_engine, 32, params)
    row.stop = lambda ids: 3 if len(ids) >= 5 else None
    decode_rows(dream_engine.runner, [row])
    assert row.stop_reason == "syntax" and row.cut
    assert row.end_at == row.span_start + 3
    span = row.canvas[row.span_start : row.span_end].tolist()
    assert set(span[3:]) == {dream_engine.runner.fill_id}
    assert row.nfe_full + row.nfe_block == 5  # the fifth token closed it: nothing after


def test_min_tokens_outranks_the_stop_rule(dream_engine: Engine) -> None:
    """A construct that ends before `min_tokens` does not end the fill: the rule gives way."""
    params = InfillParams(span=16, block_size=8, threshold=2.0, min_tokens=12)
    row = rows_for(dream_engine, 16, params, max_span=40)
    row.stop = lambda ids: 3 if len(ids) >= 5 else None
    decode_rows(dream_engine.runner, [row])
    assert row.stop_reason != "syntax" and not row.cut and row.stop is None
    assert row.span_len == 16  # no growth either: no construct is known any more
    assert row.committed >= 12


def test_a_full_span_grows_while_the_construct_is_open(dream_engine: Engine) -> None:
    params = InfillParams(span=8, block_size=8, max_span=64, threshold=0.0)
    open_row = rows_for(dream_engine, 8, params, max_span=28)
    open_row.stop = lambda ids: None  # never closes
    closed = rows_for(dream_engine, 8, params, max_span=28)
    closed.stop = lambda ids: len(ids) if len(ids) >= 8 else None
    plain = rows_for(dream_engine, 8, params)  # no construct known: the span is a budget
    decode_rows(dream_engine.runner, [open_row, closed, plain])
    assert open_row.span_len == 28 and open_row.grown == 20
    assert open_row.nfe_full == 4  # 8 + 8 + 8 + 4: each new block starts with a full pass
    assert open_row.stop_reason == "span_full"
    assert MASK_ID not in open_row.canvas.tolist()
    assert closed.grown == 0 and closed.stop_reason == "syntax"
    assert plain.grown == 0 and plain.span_len == 8


@pytest.mark.parametrize("cache", ["dual", "prefix"])
def test_the_cache_is_exact_across_growth(dream_engine: Engine, cache: str) -> None:
    """After growth, decoding goes on exactly as for a canvas built at the longer length with the
    first block already written: the suffix moved, and no key at a stale position is read."""
    params = InfillParams(span=8, block_size=8, threshold=0.3, cache=cache)  # type: ignore[arg-type]
    grown = rows_for(dream_engine, 8, params, max_span=16)
    grown.stop = lambda ids: None
    first: list[int] = []

    def watch(_: object) -> None:
        if not first and grown.grown:
            first.extend(grown.canvas[grown.span_start : grown.span_start + 8].tolist())

    decode_rows(dream_engine.runner, [grown], observer=watch)
    assert grown.grown == 8 and len(first) == 8
    built = rows_for(dream_engine, 16, params)
    built.canvas[built.span_start : built.span_start + 8] = torch.tensor(first)
    decode_rows(dream_engine.runner, [built])
    assert built.canvas.tolist() == grown.canvas.tolist()
    assert built.nfe_block > 0  # window passes ran against the cache after the move


def test_growth_never_passes_the_model_positions(dream_engine: Engine) -> None:
    limit = dream_engine.args.max_positions
    params = InfillParams(span=8, block_size=8, max_span=512, threshold=0.0)
    row = rows_for(dream_engine, 8, params, max_span=512)
    row.stop = lambda ids: None
    decode_rows(dream_engine.runner, [row])
    assert row.length <= limit and row.span_end == limit  # the far suffix gave way, then the span


def test_expand_becomes_two_masks_up_to_max_span(dream_engine: Engine) -> None:
    engine = Engine(
        dream_engine.model, dream_engine.tokenizer, MASK_ID, dream_engine.end_ids, expand_id=7
    )
    old = biased(engine, 7, 8.0)
    try:
        params = InfillParams(span=4, block_size=4, max_span=12, expand=True)
        r = engine.infill(PREFIX, SUFFIX, params)
        fixed = engine.infill(PREFIX, SUFFIX, replace(params, expand=False))
    finally:
        engine.model.lm_head = old
    assert r.edits >= 8 and r.span == 12  # every expand added a mask until the cap
    assert 7 not in r.token_ids and len(r.token_ids) == 12
    assert fixed.edits == 0 and fixed.span == 4 and 7 not in fixed.token_ids


def test_expand_ends_at_the_model_positions(dream_engine: Engine) -> None:
    """A model that always wants room, on a canvas already at the model's positions: expand is
    refused there, so the decode ends (it once turned the expand into a mask forever)."""
    engine = Engine(
        dream_engine.model, dream_engine.tokenizer, MASK_ID, dream_engine.end_ids, expand_id=7
    )
    limit = engine.args.max_positions
    long_prefix = PREFIX + "\n    x = 1" * limit  # more tokens than the model has positions
    old = biased(engine, 7, 8.0)
    try:
        params = InfillParams(span=8, block_size=4, max_span=64, expand=True)
        r = engine.infill(long_prefix, SUFFIX, params)
    finally:
        engine.model.lm_head = old
    assert r.stop_reason in ("span_full", "end_token") and 7 not in r.token_ids
    assert r.nfe < 64 and r.span <= 64


def test_expand_and_delete_churn_is_bounded(dream_engine: Engine) -> None:
    engine = Engine(
        dream_engine.model,
        dream_engine.tokenizer,
        MASK_ID,
        dream_engine.end_ids,
        expand_id=7,
        delete_id=9,
    )
    old = biased(engine, 7, 8.0)
    try:
        with torch.no_grad():
            engine.model.lm_head.bias[9] = 8.0  # both wanted everywhere, about equally
        r = engine.infill(
            PREFIX, SUFFIX, InfillParams(span=4, block_size=4, max_span=8, expand=True)
        )
    finally:
        engine.model.lm_head = old
    # The model traded expands for deletes until the bound (2 * max_span edits; one step may
    # apply up to a block's worth more), then decoded at the length it had: it ended by itself,
    # with no control token left in the text.
    assert 2 * 8 <= r.edits <= 2 * 8 + 4
    assert r.stop_reason in ("span_full", "end_token")
    assert not {7, 9} & set(r.token_ids) and r.span <= 8


def test_delete_removes_its_position(dream_engine: Engine) -> None:
    engine = Engine(
        dream_engine.model, dream_engine.tokenizer, MASK_ID, dream_engine.end_ids, delete_id=9
    )
    old = biased(engine, 9, 50.0)
    try:
        r = engine.infill(PREFIX, SUFFIX, InfillParams(span=6, block_size=4, expand=True))
    finally:
        engine.model.lm_head = old
    assert r.edits == 6 and r.span == 0 and r.text == "" and r.tokens == 0


def test_a_request_is_encoded_once_for_every_candidate(dream_engine: Engine) -> None:
    calls: list[str] = []
    encode = dream_engine.encode

    def counting(text: str) -> list[int]:
        calls.append(text)
        return encode(text)

    dream_engine.encode = counting  # type: ignore[method-assign]
    try:
        reqs = dream_engine.requests(PREFIX, SUFFIX, [InfillParams(span=s) for s in (4, 8, 16)])
    finally:
        del dream_engine.encode
    assert calls == [PREFIX, SUFFIX]
    assert [r.span for r in reqs] == [4, 8, 16]
    assert all(isinstance(r, InfillRequest) and r.prefix_ids == reqs[0].prefix_ids for r in reqs)
