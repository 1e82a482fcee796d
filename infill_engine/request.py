"""A hole as the block loop runs it: `InfillRequest` (ids encoded once, the span, the stop rule
from the plan), the span-plan protocol the engine reads, and the request-building policies
that have no model in them: the span heuristic without a planner, the candidate spans, how far a
planned row may reach, and the context rule: budgets that fit, one trim for callers that bring
any length, and the check that nothing is trimmed twice."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .params import InfillParams
from .stop import StopRule

DEFAULT_PARAMS = InfillParams()
# Context around a hole, in model tokens, unless the caller says otherwise (the planner's
# budgets, the language server's `context.prefixTokens` / `context.suffixTokens`).
PREFIX_TOKENS = 1024
SUFFIX_TOKENS = 512


@dataclass(frozen=True)
class InfillRequest:
    """One hole, encoded once: what the block loop runs. `Engine.request` builds it from text
    and a span plan; token-level callers (bench, evaluation) build it from ids directly."""

    prefix_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]
    span: int  # the masks placed at the start
    params: InfillParams = DEFAULT_PARAMS
    cancel: threading.Event | None = None
    # The construct the span fills, from the plan: the span stops at its end ("syntax") and, while
    # it is still open, a full span grows by a block at a time up to max_span.
    stop: StopRule | None = None
    max_span: int = 0  # the most masks the span may reach by growth or expand (0: span)
    # The span's first content, `span` ids with the mask where the model predicts (a refine
    # keeps the user's tokens and remasks a few); None: every position a mask.
    fill: tuple[int, ...] | None = None
    # Candidate fills from elsewhere (drafts/), each as ids from the span's first position, best
    # first: the decoding's guesses and its fast mode use them (speculate.py).
    drafts: tuple[tuple[int, ...], ...] = ()


class SpanPlanLike(Protocol):
    """What the engine reads from a span plan (planner.SpanPlan)."""

    @property
    def span(self) -> int: ...
    @property
    def max_span(self) -> int: ...
    @property
    def stop(self) -> StopRule: ...


RequestLike = InfillRequest | tuple[str, str] | tuple[str, str, InfillParams | None]


def auto_span(prefix: str, suffix: str, max_span: int) -> int:
    """A line/indent heuristic for span="auto" when no syntax planner is given.

    Text after the cursor on the same line means the hole most likely finishes that line; a
    cursor at the end of a line opening a block (":" or an open bracket) is a body; otherwise a
    statement or two. The span is only a budget: the model ends it early with end tokens.
    """
    rest_of_line = suffix.split("\n", 1)[0]
    line = prefix.rsplit("\n", 1)[-1]
    if rest_of_line.strip():
        want = 16
    elif line.rstrip().endswith((":", "(", "[", "{")):
        want = 64
    else:
        want = 32
    return min(want, max_span)


def initial_span(p: InfillParams, plan: SpanPlanLike | None, prefix: str, suffix: str) -> int:
    """A request's initial span: the params' int, else the plan's, else the line/indent
    heuristic."""
    if isinstance(p.span, int):
        return p.span
    if plan is not None:
        return min(plan.span, p.max_span)
    return auto_span(prefix, suffix, p.max_span)


def budgets(
    max_positions: int, span: int, prefix_tokens: int, suffix_tokens: int
) -> tuple[int, int]:
    """Context budgets within what the model can see beside the span: asked-for budgets that
    do not fit shrink, the suffix keeping at least a quarter of the room. The one rule of how
    context is cut: the planner and prepare size the context with it, `trim_context` trims ids."""
    room = max(0, max_positions - span)
    if prefix_tokens + suffix_tokens <= room:
        return prefix_tokens, suffix_tokens
    suffix = min(suffix_tokens, max(room // 4, room - prefix_tokens))
    return min(prefix_tokens, room - suffix), suffix


def trim_context(
    prefix: Sequence[int], suffix: Sequence[int], room: int
) -> tuple[list[int], list[int]]:
    """Trim the far ends (prefix start, suffix end) so prefix + suffix fit in `room` tokens: for
    callers that bring whole texts or ids of any length (`Engine.infill(prefix, suffix)`, a
    refine's context as sent), once, when the request is built. A prepared hole (hole.prepare)
    is cut to budgets that fit instead."""
    keep_prefix, keep_suffix = budgets(room, 0, len(prefix), len(suffix))
    return list(prefix[len(prefix) - keep_prefix :]), list(suffix[:keep_suffix])


def fit_context(
    prefix: Sequence[int], suffix: Sequence[int], room: int
) -> tuple[list[int], list[int]]:
    """A request's context as the row's, checked to fit in `room` tokens beside its span: a
    context is trimmed once (trim_context, or prepare's budgets) and never again where the row
    is built, so the window a fill is finished against is the one the model saw. ValueError
    otherwise."""
    if len(prefix) + len(suffix) > room:
        raise ValueError(
            f"a context of {len(prefix)} + {len(suffix)} tokens does not fit the {room} "
            "positions beside the span; cut it to budgets (hole.prepare) or trim it "
            "(request.trim_context) when building the request"
        )
    return list(prefix), list(suffix)


def span_reach(span: int, plan_max_span: int, max_span: int) -> int:
    """The most masks a row that grows may reach: its initial span, or the room its plan's
    max_span and its params' leave it (the lesser of the two)."""
    return max(span, min(plan_max_span, max_span))


def candidate_spans(base: int, cap: int, candidates: int) -> list[int]:
    """The initial spans of `candidates` fills of one hole: the planned (or fixed) span `base`,
    then twice and half of it, each within [1, cap] and none twice. One candidate: `base`."""
    spans: list[int] = []
    for s in (base, base * 2, base // 2):
        s = max(1, min(s, cap))
        if s not in spans:
            spans.append(s)
    return spans[: max(1, candidates)]
