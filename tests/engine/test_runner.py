"""The block loop: caches, end-token fill, batching, cancellation, threshold edge cases."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest
import torch
from block_loop import decode_rows
from cache_checks import block_start_errors, window_error
from conftest import EOS_ID, VOCAB, biased, greedy_reference

from infill_engine import Engine, InfillParams
from infill_engine.cache import KVCache
from infill_engine.runner import Row, RowRequest, StepEvent

PREFIX = "def add(a, b):\n    return"
SUFFIX = "\n\nclass Point:\n"


def count_calls(engine: Engine) -> tuple[list[int], Any]:
    """Record every forward pass of the real model."""
    calls: list[int] = []
    return calls, engine.model.register_forward_hook(lambda *_: calls.append(1))


@pytest.mark.parametrize("cache", ["dual", "prefix"])
def test_block_start_passes_equal_a_full_pass(dream_engine: Engine, cache: str) -> None:
    """Every refresh pass (the first pass of each block) gives the logits of engine.logits."""
    p = InfillParams(span=24, block_size=8, cache=cache)
    errors, r = block_start_errors(dream_engine, PREFIX, SUFFIX, p)
    assert len(errors) == r.nfe_full == 3
    assert max(errors) <= 1e-5


@pytest.mark.parametrize("cache", ["dual", "prefix"])
@pytest.mark.parametrize("block_start", [0, 5])
def test_window_pass_on_unchanged_canvas_equals_full_pass(
    dream_engine: Engine, cache: str, block_start: int
) -> None:
    """Right after a refresh, recomputing only the window against the cache reproduces the
    full-pass logits: the scatter, the trash slot, the shift and the key mask are consistent."""
    runner = dream_engine.runner
    ids = torch.randint(2, VOCAB, (14,), generator=torch.Generator().manual_seed(5))
    ids[block_start : block_start + 6] = dream_engine.mask_id
    p = RowRequest(InfillParams(span=6, block_size=4, cache=cache))
    row = Row(ids, block_start, block_start + 6, p)
    other = Row(ids[:11].clone(), 2, 8, p)
    kv = KVCache(dream_engine.args.num_layers, 2, 14)
    other.slot = 1
    with torch.inference_mode():
        full = runner.full_pass([row, other], kv)
        window = runner.window_pass([row, other], kv)
    assert row.nfe_full == 1 and row.nfe_block == 1
    assert (full - window).abs().max().item() <= 1e-5
    # and against a pass with no store at all (the check the other families run)
    assert window_error(dream_engine, cache, block_start) <= 1e-4


def test_no_cache_means_every_step_is_full(dream_engine: Engine) -> None:
    # τ = 2: one commit per step, whatever the confidences
    one = InfillParams(span=16, block_size=8, threshold=2.0, cache="none")
    r = dream_engine.infill(PREFIX, SUFFIX, one)
    assert r.nfe_block == 0 and r.nfe_full == r.tokens >= 2  # one full pass per commit
    # the fixed schedule also commits the most confident position per step: the same tokens
    f = dream_engine.infill(
        PREFIX, SUFFIX, InfillParams(span=16, block_size=8, decode="fixed", cache="none")
    )
    assert f.token_ids == r.token_ids and f.nfe_full == r.nfe_full
    d = dream_engine.infill(PREFIX, SUFFIX, replace(one, cache="dual"))
    blocks = (d.tokens + 7) // 8
    assert d.nfe_full == blocks and d.nfe_full + d.nfe_block == d.tokens  # a refresh per block


def test_threshold_above_one_commits_one_token_per_step(dream_engine: Engine) -> None:
    p = InfillParams(span=12, block_size=4, decode="threshold", threshold=1.5)
    row = dream_engine.rows.row(dream_engine.request(PREFIX, SUFFIX, p))
    decode_rows(dream_engine.runner, [row])
    assert row.trace == [1] * 12
    assert row.nfe_full + row.nfe_block == 12


def test_threshold_zero_commits_whole_block_at_first_pass(dream_engine: Engine) -> None:
    r = dream_engine.infill(PREFIX, SUFFIX, InfillParams(span=16, block_size=8, threshold=0.0))
    assert (r.nfe_full, r.nfe_block, r.tokens) == (2, 0, 16)


def test_end_token_fills_the_rest_without_model_calls(dream_engine: Engine) -> None:
    old = biased(dream_engine, EOS_ID, 40.0)
    calls, handle = count_calls(dream_engine)
    try:
        r = dream_engine.infill(PREFIX, SUFFIX, InfillParams(span=64, block_size=8))
    finally:
        handle.remove()
        dream_engine.model.lm_head = old
    # The first pass commits the end token everywhere in block 0 (p ~ 1 >= tau); the other seven
    # blocks are filled by the rule and never run.
    assert r.stop_reason == "end_token"
    assert r.text == "" and r.token_ids == []
    assert len(calls) == r.nfe_full + r.nfe_block == 1


def test_min_tokens_keeps_end_tokens_out_of_the_first_positions(dream_engine: Engine) -> None:
    old = biased(dream_engine, EOS_ID, 40.0)
    try:
        p = InfillParams(span=64, block_size=8, min_tokens=11)
        r = dream_engine.infill(PREFIX, SUFFIX, p)
    finally:
        dream_engine.model.lm_head = old
    # The end token wins everywhere it is allowed: right after the 11 forced positions, which
    # straddle the first block boundary.
    assert r.stop_reason == "end_token"
    assert len(r.token_ids) == 11 and EOS_ID not in r.token_ids


def test_end_token_mid_span_one_token_per_step(dream_engine: Engine) -> None:
    old = biased(dream_engine, EOS_ID, 4.0)
    calls, handle = count_calls(dream_engine)
    try:
        p = InfillParams(span=48, block_size=8, decode="fixed")
        row = dream_engine.rows.row(dream_engine.request(PREFIX, SUFFIX, p))
        decode_rows(dream_engine.runner, [row])
    finally:
        handle.remove()
        dream_engine.model.lm_head = old
    assert row.stop_reason == "end_token" and row.end_at is not None
    decided = row.end_at - row.span_start + 1  # positions up to and including the end
    assert decided < 48
    assert len(calls) == sum(row.trace) == row.committed <= decided
    assert bool((row.canvas[row.end_at : row.span_end] == EOS_ID).all())


def test_batch_equals_one_by_one(dream_engine: Engine) -> None:
    reqs = [
        (PREFIX, SUFFIX, InfillParams(span=20, block_size=8)),
        ("x = [1, 2", "]\nprint(x)\n", InfillParams(span=7, block_size=4, cache="prefix")),
        ("", "return a\n", InfillParams(span=9, decode="fixed", cache="none")),
        ("class A:\n    def f(self):\n", "", InfillParams(span=13, decode="factor")),
    ]
    batched = dream_engine.infill_batch(reqs)
    single = [dream_engine.infill(*r) for r in reqs]
    assert [b.token_ids for b in batched] == [s.token_ids for s in single]
    assert [(b.nfe_full, b.nfe_block) for b in batched] == [
        (s.nfe_full, s.nfe_block) for s in single
    ]


def test_rows_join_a_running_batch_between_steps(dream_engine: Engine) -> None:
    """A longer canvas joining after two steps grows the cache (slots and positions) without
    disturbing the rows inside: every row decodes exactly what it decodes alone."""
    e = dream_engine
    p = InfillParams(span=16, block_size=8, threshold=2.0)
    first = [e.request(PREFIX, SUFFIX, p), e.request("a = 1\n", "", replace(p, cache="prefix"))]
    late = e.request("import os\n" * 6 + PREFIX, SUFFIX * 3, replace(p, span=24))
    batch = e.runner.batch()
    rows = [e.rows.row(r) for r in first]
    batch.admit(rows)
    ended = batch.step() + batch.step()
    length = batch.cache.length
    late_row = e.rows.row(late)
    assert late_row.max_length > length
    batch.admit([late_row])
    assert batch.cache.batch == 3 and batch.cache.length == late_row.max_length
    while batch:
        ended += batch.step()
    assert {id(r) for r in ended} == {id(r) for r in [*rows, late_row]}
    assert batch.cache.batch == 0 and batch.cache.nbytes == 0  # freed as the last row left
    for req, row in zip([*first, late], [*rows, late_row], strict=True):
        alone = e.run([req])[0]
        assert e.rows.result(row, req).token_ids == alone.token_ids
        assert (row.nfe_full, row.nfe_block) == (alone.nfe_full, alone.nfe_block)


def test_cancel_returns_promptly_and_frees_cache(dream_engine: Engine) -> None:

    cancel = threading.Event()
    events: list[StepEvent] = []

    def observe(e: StepEvent) -> None:
        events.append(e)
        if e.step == 2:
            cancel.set()

    p = InfillParams(span=40, block_size=8, threshold=2.0)
    reqs = [
        dream_engine.request(PREFIX, SUFFIX, p, cancel=cancel),
        dream_engine.request("a = 1\n", "", p),
    ]
    cancelled, other = dream_engine.infill_batch(reqs, observer=observe)
    assert cancelled.stop_reason == "cancelled"
    assert cancelled.nfe_full + cancelled.nfe_block == 2  # stopped at the next step
    assert other.stop_reason == "span_full" and other.tokens == 40
    assert events[1].cache_rows == 2 and events[2].cache_rows == 1
    assert events[2].cache_bytes == events[1].cache_bytes // 2
    assert events[-1].cache_rows == 0 and events[-1].cache_bytes == 0


def test_empty_batch(dream_engine: Engine) -> None:
    assert dream_engine.infill_batch([]) == []


@pytest.mark.parametrize("threshold", [2.0, 0.0])  # one token per pass; a block per pass
def test_empty_prefix_and_suffix(dream_engine: Engine, threshold: float) -> None:
    """A canvas that is the span alone (position 0 scored by its own hidden state, Dream's shift
    having no token before it) decodes exactly as full passes recomputed from scratch do."""
    p = InfillParams(span=6, block_size=4, threshold=threshold, cache="none")
    row = dream_engine.rows.row(dream_engine.request("", "", p))
    assert (row.span_start, row.span_end, row.length) == (0, 6, 6)
    r = dream_engine.infill("", "", p)
    assert r.stop_reason in ("span_full", "end_token") and r.span == 6
    assert r.token_ids == greedy_reference(dream_engine, "", "", 6, 4, threshold)
    assert r.token_ids and r.text == dream_engine.decode_ids(r.token_ids)
    assert r.nfe_full == (6 if threshold > 1 else 2)
    dual = dream_engine.infill("", "", replace(p, cache="dual"))
    assert dual.nfe_full == 2 and dual.nfe_full + dual.nfe_block == r.nfe_full


def test_sampling_is_seeded(dream_engine: Engine) -> None:
    p = InfillParams(span=10, temperature=1.0, top_p=0.9, seed=7)
    a, b = dream_engine.infill(PREFIX, SUFFIX, p), dream_engine.infill(PREFIX, SUFFIX, p)
    greedy = dream_engine.infill(PREFIX, SUFFIX, InfillParams(span=10))
    assert a.token_ids == b.token_ids
    assert a.token_ids != greedy.token_ids


def test_oversized_context_is_trimmed_at_the_far_ends(dream_engine: Engine) -> None:
    from infill_engine.request import trim_context

    prefix, suffix = trim_context(list(range(900)), list(range(1000, 1300)), 400)
    assert len(prefix) + len(suffix) == 400
    assert prefix[-1] == 899 and suffix[0] == 1000  # the text next to the hole is kept
    r = dream_engine.infill(PREFIX * 80, SUFFIX * 80, InfillParams(span=8))
    assert r.span == 8 and r.nfe_full >= 1
    with pytest.raises(ValueError, match="exceeds the model's 512 positions"):
        dream_engine.infill("a", "b", InfillParams(span=600, max_span=1000))


def test_refine_repredicts_only_the_least_likely_tokens(dream_engine: Engine) -> None:
    text = "x = compute(a, b)\n    y = x + 1"
    ids = dream_engine.encode(text)
    r = dream_engine.refine(PREFIX, text, SUFFIX, fraction=0.3)
    n = round(0.3 * len(ids))
    assert len(r.remasked) == n and r.nfe >= 2
    assert len(r.token_ids) == len(ids) and dream_engine.mask_id not in r.token_ids
    remasked = set(r.remasked)
    # Every token outside the remasked set is still the user's own.
    assert [t for i, t in enumerate(r.token_ids) if i not in remasked] == [
        t for i, t in enumerate(ids) if i not in remasked
    ]
    assert r.changed == sum(a != b for a, b in zip(ids, r.token_ids, strict=True)) <= n
    with pytest.raises(ValueError, match="empty"):
        dream_engine.refine(PREFIX, "", SUFFIX)


def test_refine_remasks_exactly_the_least_likely_tokens(dream_engine: Engine) -> None:
    """The remasked set is the argmin of log p(token | everything else), from one full pass."""
    text = "x = compute(a, b)\n    y = x + 1"
    ids = dream_engine.encode(text)
    canvas = dream_engine.encode(PREFIX) + ids + dream_engine.encode(SUFFIX)
    lo = len(dream_engine.encode(PREFIX))
    logp = torch.log_softmax(dream_engine.logits(torch.tensor([canvas]))[0], dim=-1)
    mine = [float(logp[lo + i, t]) for i, t in enumerate(ids)]
    n = round(0.3 * len(ids))
    r = dream_engine.refine(PREFIX, text, SUFFIX, fraction=0.3)
    assert r.remasked == sorted(sorted(range(len(ids)), key=lambda i: mine[i])[:n])


def test_refine_holds_end_tokens_off_even_when_the_model_wants_them(dream_engine: Engine) -> None:
    old = dream_engine.model.lm_head
    new = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        new.weight.copy_(old.weight)
        new.bias.zero_()
        new.bias[EOS_ID] = 50.0  # an end token is the favourite everywhere
    dream_engine.model.lm_head = new
    try:
        text = "x = compute(a, b)\n    y = x + 1"
        r = dream_engine.refine(PREFIX, text, SUFFIX, fraction=0.5)
        plain = dream_engine.infill(PREFIX, SUFFIX, InfillParams(span=8))
    finally:
        dream_engine.model.lm_head = old
    assert plain.stop_reason == "end_token"  # the bias bites where nothing holds it off
    assert len(r.token_ids) == len(dream_engine.encode(text))
    assert not set(r.token_ids) & set(dream_engine.end_ids)  # no end token erased the rest
    assert r.changed >= 1


@pytest.mark.parametrize("cache", ["dual", "prefix"])
def test_window_passes_recompute_only_what_the_cache_mode_says(
    dream_engine: Engine, cache: str
) -> None:
    """Dual recomputes exactly the block plus the shift column and keeps the suffix frozen;
    prefix recomputes from the block to the end of the canvas."""
    widths: list[tuple[int, int]] = []  # (tokens in the pass, first position)

    def hook(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: torch.Tensor) -> None:
        store = kwargs.get("store")
        if store is not None and type(store).__name__ != "_Refresh":
            widths.append((int(args[0].shape[1]), int(args[1][0, 0])))

    handle = dream_engine.model.register_forward_hook(hook, with_kwargs=True)
    try:
        params = InfillParams(span=16, block_size=8, cache=cache, threshold=2.0)
        r = dream_engine.infill(PREFIX, SUFFIX, params)
    finally:
        handle.remove()
    assert widths and len(widths) == r.nfe_block
    n_prefix, n_suffix = len(dream_engine.encode(PREFIX)), len(dream_engine.encode(SUFFIX))
    length = n_prefix + 16 + n_suffix
    shift = dream_engine.args.logits_shift
    for width, first in widths:
        block_start = first + shift
        assert (block_start - n_prefix) % 8 == 0  # a block boundary of the span
        if cache == "dual":
            assert width == 8 + shift
        else:
            assert width == length - block_start + shift


def test_window_pass_writes_the_fresh_block_kv_into_the_cache(dream_engine: Engine) -> None:
    """After each dual window pass, the cache holds the K/V of the block's current tokens at
    the first layer (which depends on nothing else): a window that never wrote them would leave
    the K/V of the masks from the block's refresh."""
    diffs: list[float] = []

    def hook(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: torch.Tensor) -> None:
        store = kwargs.get("store")
        if store is None or type(store).__name__ != "_Window":
            return
        ids, positions = args[0], args[1]
        fresh = KVCache(dream_engine.args.num_layers, ids.shape[0], ids.shape[1])
        handle.remove()
        dream_engine.model(ids, positions, store=fresh.refresh())
        reattach()
        written = store.slots[0] < store.cache.length
        got = store.cache.k[0][0][:, store.slots[0][written]]
        want = fresh.k[0][0][:, : ids.shape[1]][:, written]
        diffs.append((got - want).abs().max().item())

    def reattach() -> None:
        nonlocal handle
        handle = dream_engine.model.register_forward_hook(hook, with_kwargs=True)

    handle = dream_engine.model.register_forward_hook(hook, with_kwargs=True)
    try:
        params = InfillParams(span=16, block_size=8, cache="dual", threshold=2.0)
        r = dream_engine.infill(PREFIX, SUFFIX, params)
    finally:
        handle.remove()
    assert len(diffs) == r.nfe_block > 0
    assert max(diffs) <= 1e-5


@pytest.mark.parametrize("favourite", ["mask", "reserved"])
def test_mask_and_control_tokens_are_never_a_prediction(
    dream_engine: Engine, favourite: str
) -> None:
    from conftest import MASK_ID

    # a control token (DreamOn's <|expand|>) the engine is told never to emit as text
    banned = MASK_ID if favourite == "mask" else 7
    engine = Engine(
        dream_engine.model,
        dream_engine.tokenizer,
        dream_engine.mask_id,
        dream_engine.end_ids,
        reserved_ids=(7,),
    )
    old = engine.model.lm_head
    new = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        new.weight.copy_(old.weight)
        new.bias.zero_()
        new.bias[banned] = 50.0  # the model's favourite token everywhere
    engine.model.lm_head = new
    try:
        r = engine.infill(PREFIX, SUFFIX, InfillParams(span=12, block_size=4, cache="dual"))
        plain = dream_engine.infill(PREFIX, SUFFIX, InfillParams(span=12, block_size=4))
    finally:
        engine.model.lm_head = old
    assert r.stop_reason in ("span_full", "end_token") and banned not in r.token_ids
    assert r.tokens >= 1
    if favourite == "reserved":  # the same model without the rule would emit it: the rule acts
        assert 7 in plain.token_ids
