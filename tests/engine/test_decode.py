"""Commit policies as pure functions, and Theorem 1 of Fast-dLLM as a property test."""

from __future__ import annotations

import itertools

import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from infill_engine import InfillParams
from infill_engine.decode import fixed_k, select, select_factor, select_threshold


def marginals(joint: torch.Tensor) -> torch.Tensor:
    """joint [V]*n -> [n, V] marginal distributions."""
    n = joint.dim()
    if n == 1:
        return joint[None]  # sum(dim=[]) would sum everything
    return torch.stack([joint.sum(dim=[d for d in range(n) if d != i]) for i in range(n)])


def greedy_sequential(joint: torch.Tensor) -> list[int]:
    """Decode one position per step (tau > 1), conditioning the joint on each commit."""
    n = joint.dim()
    fixed: dict[int, int] = {}
    params = InfillParams(span=n, threshold=2.0)
    while len(fixed) < n:
        cond = joint.clone()
        for i, v in fixed.items():
            index = [slice(None)] * n
            index[i] = v
            keep = torch.zeros_like(cond)
            keep[tuple(index)] = cond[tuple(index)]
            cond = keep
        m = marginals(cond / cond.sum())
        conf, tok = m.max(dim=-1)
        masked = torch.tensor([i not in fixed for i in range(n)])
        pick = select(conf, masked, params, block_len=n, step=len(fixed))
        assert int(pick.sum()) == 1
        i = int(pick.nonzero()[0])
        fixed[i] = int(tok[i])
    return [fixed[i] for i in range(n)]


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 3),
    vocab=st.integers(2, 3),
    eps=st.floats(0.01, 0.25),
    data=st.data(),
)
def test_theorem1_parallel_equals_sequential(
    n: int, vocab: int, eps: float, data: st.DataObject
) -> None:
    assume((n + 1) * eps <= 1)
    cells = vocab**n
    weights = data.draw(st.lists(st.floats(0, 1), min_size=cells, max_size=cells))
    mode = data.draw(st.integers(0, cells - 1))
    joint = torch.tensor(weights, dtype=torch.float64) * eps / n
    joint[mode] += 1.0
    joint = (joint / joint.sum()).view(*([vocab] * n))
    m = marginals(joint)
    conf, tok = m.max(dim=-1)
    assume(bool((conf > 1 - eps).all()))
    # Parallel: threshold 1 - eps commits all n positions at once, each to its marginal argmax.
    pick = select_threshold(conf, torch.ones(n, dtype=torch.bool), 1 - eps)
    assert bool(pick.all())
    assert tok.tolist() == greedy_sequential(joint)
    # ...and that is the joint's mode.
    assert tok.tolist() == list(
        next(itertools.islice(itertools.product(range(vocab), repeat=n), mode, None))
    )


def test_threshold_always_commits_the_most_confident() -> None:
    conf = torch.tensor([0.3, 0.95, 0.5, 0.97])
    masked = torch.tensor([True, True, True, False])
    assert select_threshold(conf, masked, 0.9).tolist() == [False, True, False, False]
    assert select_threshold(conf, masked, 1.5).tolist() == [False, True, False, False]
    assert select_threshold(conf, masked, 0.0).tolist() == [True, True, True, False]


def test_factor_rule() -> None:
    # sorted: 0.99, 0.9, 0.6; (i+1)(1-c_i): 0.02, 0.3, 1.6 -> f=1 takes two, f=2 takes three
    conf = torch.tensor([0.6, 0.99, 0.9])
    masked = torch.ones(3, dtype=torch.bool)
    assert select_factor(conf, masked, 1.0).tolist() == [False, True, True]
    assert select_factor(conf, masked, 2.0).tolist() == [True, True, True]
    assert select_factor(conf, masked, 0.001).tolist() == [False, True, False]


def test_fixed_schedule_spreads_evenly() -> None:
    assert [fixed_k(8, 4, 8, s) for s in range(1)] == [2]
    assert fixed_k(7, 4, 8, 0) == 2 and fixed_k(5, 4, 8, 1) == 2 and fixed_k(1, 4, 8, 3) == 1
    assert fixed_k(3, None, 8, 0) == 1  # default: one per step over the block
    assert fixed_k(3, 2, 8, 5) == 3  # past the schedule: finish the block


@settings(max_examples=200, deadline=None)
@given(
    conf=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=24),
    masked_bits=st.lists(st.booleans(), min_size=24, max_size=24),
    factor=st.floats(0.05, 1.0),
)
def test_factor_commits_only_sets_that_meet_the_theorem_condition(
    conf: list[float], masked_bits: list[bool], factor: float
) -> None:
    """Fast-dLLM's factor rule with f <= 1 claims Theorem 1's condition for what it commits:
    every committed set of n > 1 positions has (n + 1) * max(1 - p) < f <= 1."""
    c = torch.tensor(conf, dtype=torch.float64)
    masked = torch.tensor(masked_bits[: len(conf)])
    assume(bool(masked.any()))
    pick = select_factor(c, masked, factor)
    assert bool((pick <= masked).all())  # only masked positions
    n = int(pick.sum())
    assert n >= 1
    if n > 1:
        assert (n + 1) * float((1 - c[pick]).max()) < factor
    # and it is maximal: the next most confident masked position would break the bound
    rest = c.masked_fill(~masked | pick, -1.0)
    if bool((rest >= 0).any()):
        nxt = float(rest.max())
        worst = max(float((1 - c[pick]).max()), 1 - nxt)
        assert (n + 2) * worst >= factor


def test_top_p_keeps_only_the_nucleus() -> None:
    from infill_engine.decode import propose

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    gen = torch.Generator().manual_seed(0)
    # a nucleus of mass 0.5 holds only the top token: sampling is then greedy
    picks = {int(propose(logits, 1.0, 0.5, gen)[0]) for _ in range(50)}
    assert picks == {0}
    # mass 0.8 admits the top two, never the tail
    picks = {int(propose(logits, 1.0, 0.8, gen)[0]) for _ in range(200)}
    assert picks == {0, 1}
    # confidence is the renormalised probability of the sampled token
    token, conf = propose(logits, 1.0, 0.8, gen)
    assert abs(float(conf[0]) - [0.625, 0.375][int(token[0])]) < 1e-5
