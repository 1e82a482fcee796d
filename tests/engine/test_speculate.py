"""Guessed states and drafts inside decoding (speculate.py): the exact mode decodes plain
decoding's tokens in fewer passes, on random weights and on the builtin model, alone and in a
batch; the fast mode commits a draft only where the model predicts it back."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dllm_lab.holes import holes
from infill_engine import Engine, InfillParams, InfillRequest, load, speculate
from infill_engine.graphs import WindowGraphs

LIB = Path(random.__file__).parent
FILES = [LIB / "textwrap.py", LIB / "json" / "encoder.py"]  # code none of the models trained on


@pytest.fixture(scope="module")
def builtin() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


def random_requests(engine: Engine, n: int, seed: int) -> list[InfillRequest]:
    """Holes of random text and lengths, over both cached modes and several block sizes."""
    rng = random.Random(seed)
    words = ["def", "x", "(", ")", ":", "\n", "    ", "return", "=", "1", "+", "a", ",", "[", "]"]
    out = []
    for i in range(n):
        prefix = "".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
        suffix = "".join(rng.choice(words) for _ in range(rng.randint(0, 20)))
        span = rng.randint(2, 40)
        params = InfillParams(
            span=span,
            max_span=span,
            block_size=rng.choice([4, 8, 32]),
            cache="dual" if i % 3 else "prefix",
            threshold=rng.choice([0.9, 0.5, 0.2]),
            min_tokens=rng.randint(0, span),
        )
        out.append(engine.request(prefix, suffix, params))
    return out


def file_requests(engine: Engine, kinds: tuple[str, ...], n: int) -> list[InfillRequest]:
    """Holes cut from real code, planned as the service plans them."""
    from infill_engine import planner

    rng = random.Random(0)
    out = []
    for path in FILES:
        text = path.read_text()
        for kind in kinds:
            for h in holes(text, "python", kind, rng, n):
                plan = planner.plan(h.text, h.offset, "python", engine.encode)
                out.append(engine.request(h.prefix, h.suffix, InfillParams(min_tokens=1), plan))
    return out


def run(engine: Engine, reqs: list[InfillRequest], mode: str, batched: bool = False) -> list:
    asks = [replace(r, params=replace(r.params, speculate=mode)) for r in reqs]  # type: ignore[arg-type]
    if batched:
        return engine.run(asks)
    return [engine.run([a])[0] for a in asks]


def test_the_exact_mode_decodes_plain_decodings_tokens_on_random_weights(
    dream_engine: Engine,
) -> None:
    reqs = random_requests(dream_engine, 40, seed=1)
    plain = run(dream_engine, reqs, "off")
    exact = run(dream_engine, reqs, "exact")
    assert [r.token_ids for r in exact] == [r.token_ids for r in plain]
    assert [r.stop_reason for r in exact] == [r.stop_reason for r in plain]
    assert all(r.nfe <= p.nfe for r, p in zip(exact, plain, strict=True))
    # the guesses were taken: steps with no pass of their own, so fewer passes in all
    assert sum(r.verified for r in exact) > 0
    assert sum(r.nfe for r in exact) < sum(r.nfe for r in plain)
    assert all(r.nfe + r.verified == p.nfe for r, p in zip(exact, plain, strict=True))


def test_the_exact_mode_in_a_batch_decodes_what_plain_decoding_does_alone(
    dream_engine: Engine,
) -> None:
    reqs = random_requests(dream_engine, 12, seed=2)
    plain = run(dream_engine, reqs, "off")
    batched = run(dream_engine, reqs, "exact", batched=True)
    assert [r.token_ids for r in batched] == [r.token_ids for r in plain]


def test_the_exact_mode_decodes_the_builtin_models_tokens_in_fewer_passes(
    builtin: Engine,
) -> None:
    reqs = file_requests(builtin, ("statement", "line", "block_body"), 6)
    assert len(reqs) >= 30
    plain = run(builtin, reqs, "off")
    exact = run(builtin, reqs, "exact")
    batched = run(builtin, reqs, "exact", batched=True)
    assert [r.token_ids for r in exact] == [r.token_ids for r in plain]
    assert [r.token_ids for r in batched] == [r.token_ids for r in plain]
    assert [r.text for r in exact] == [r.text for r in plain]
    saved = sum(p.nfe for p in plain) - sum(r.nfe for r in exact)
    assert saved == sum(r.verified for r in exact) > 0


def test_the_exact_mode_through_graphed_window_passes(dream_engine: Engine) -> None:
    """The graph path's bookkeeping (a CPU stand-in for the capture: tests/engine/test_graphs.py)
    with guesses riding on the window passes: replayed, and still plain decoding's tokens."""
    p = InfillParams(span=24, max_span=24, block_size=16, threshold=2.0)  # a token a step
    reqs = [replace(r, params=p) for r in random_requests(dream_engine, 6, seed=4)]
    plain = run(dream_engine, reqs, "off")
    graphs = WindowGraphs(dream_engine.model, lambda fn: fn, after=2)
    dream_engine.runner.graphs = graphs
    try:
        exact = run(dream_engine, reqs, "exact")
    finally:
        dream_engine.runner.graphs = None
    assert graphs.replays > 0 and sum(r.verified for r in exact) > 0
    assert [r.token_ids for r in exact] == [r.token_ids for r in plain]


def test_no_lookahead_is_plain_decoding(dream_engine: Engine) -> None:
    reqs = [replace(r, params=replace(r.params, lookahead=0)) for r in random_requests(
        dream_engine, 6, seed=3)]  # fmt: skip
    plain = run(dream_engine, reqs, "off")
    none = run(dream_engine, reqs, "exact")
    assert [(r.token_ids, r.nfe, r.verified) for r in none] == [
        (p.token_ids, p.nfe, 0) for p in plain
    ]


def test_the_fast_mode_commits_a_draft_the_model_predicts_back(builtin: Engine) -> None:
    """Plain decoding's own fill as the draft: the model predicts it back, so it is committed
    whole and the fill needs fewer passes (what follows it is decoded on, and may go further
    than plain decoding did: the fast mode is not exact). A draft of other tokens is never
    committed, and then the fill is plain decoding's."""
    reqs = file_requests(builtin, ("statement", "line"), 6)
    plain = run(builtin, reqs, "off")
    pairs = [(r, p) for r, p in zip(reqs, plain, strict=True) if len(p.token_ids) >= 3]
    own = [replace(r, drafts=(tuple(p.token_ids),)) for r, p in pairs]
    fast = run(builtin, own, "fast")
    taken = [(f, p) for f, (_, p) in zip(fast, pairs, strict=True) if f.drafted]
    assert len(taken) >= len(pairs) // 2
    assert all(f.token_ids[: len(p.token_ids)] == p.token_ids for f, p in taken)
    assert sum(f.nfe for f in fast) < sum(p.nfe for _, p in pairs)

    wrong = [replace(r, drafts=(tuple([7] * 12),)) for r in reqs]
    fast = run(builtin, wrong, "fast")
    assert sum(r.drafted for r in fast) == 0
    assert [r.token_ids for r in fast] == [p.token_ids for p in plain]


def test_guesses_are_the_foreseen_commit_the_runner_up_and_the_chain() -> None:
    mask, end, fill = 9, torch.tensor([0]), 0
    block = torch.tensor([5, mask, mask, mask, mask])
    token = torch.tensor([5, 1, 2, 3, 0])
    conf = torch.tensor([1.0, 0.3, 0.8, 0.5, 0.1])
    got = speculate.guesses(block, mask, token, conf, 0.9, None, 8, end, fill)
    assert [g.tolist() for g in got] == [
        [5, mask, 2, mask, mask],  # the most confident
        [5, mask, mask, 3, mask],  # the runner-up alone
        [5, mask, 2, 3, mask],
        [5, 1, 2, 3, mask],  # never the whole block: a full block needs a full pass
    ]
    assert len(speculate.guesses(block, mask, token, conf, 0.9, None, 2, end, fill)) == 2
    # what the last pass was sure of comes first, all of it; an end token ends the block
    conf = torch.tensor([1.0, 0.95, 0.92, 0.5, 0.1])
    token = torch.tensor([5, 1, 0, 3, 4])
    first = speculate.guesses(block, mask, token, conf, 0.9, None, 1, end, fill)[0]
    assert first.tolist() == [5, 1, 0, fill, fill]
    # where the last pass was unsure, a draft's token
    draft = torch.tensor([-1, 7, 7, 7, -1])
    conf = torch.tensor([1.0, 0.3, 0.8, 0.5, 0.1])
    token = torch.tensor([5, 1, 2, 3, 4])
    got = speculate.guesses(block, mask, token, conf, 0.9, draft, 8, end, fill)
    assert got[-1].tolist() == [5, 7, 2, 3, mask]


def test_a_draft_is_committed_only_where_nothing_contradicts_it() -> None:
    mask = 9
    drafted = torch.tensor([5, 6, 7, 0])
    block = torch.tensor([5, mask, mask, mask])
    assert speculate.agrees(torch.tensor([5, 6, 7, 0]), block, drafted, mask).tolist() == [
        False, True, True, True
    ]  # fmt: skip
    assert speculate.agrees(torch.tensor([5, 6, 8, 0]), block, drafted, mask) is None
    # the real pass committed another token where the draft has one
    assert speculate.agrees(drafted, torch.tensor([5, 4, mask, mask]), drafted, mask) is None
    assert speculate.agrees(drafted, drafted, drafted, mask) is None  # nothing left to commit


@pytest.mark.parametrize(
    ("field", "value"), [("speculate", "maybe"), ("lookahead", -1), ("lookahead", 17)]
)
def test_bad_speculation_settings_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        InfillParams(**{field: value})  # type: ignore[arg-type]
