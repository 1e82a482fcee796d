"""The one hole: what every front parses into (the native call, llama.cpp's `/infill`, OpenAI's
`/v1/completions`, a refine), what the language server builds for a fill or a command, and what
an evaluation asks; and `prepare`, the one way a hole becomes rows: plan the span, cut the
context once, tokenize it once, one request per candidate span.

The context is budgeted for the most any of the hole's rows may reach (its initial span, or
the growth room its plan gives it), so the engine trims nothing of a prepared request
(request.fit_context asserts it) and the window a fill is finished against is the one the
model saw, up to its last grown block.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any

import grammars

from . import drafts, planner
from .context import Context, Tokens, build_context, build_extra, tokenize_with
from .params import InfillParams
from .request import (
    DEFAULT_PARAMS,
    PREFIX_TOKENS,
    SUFFIX_TOKENS,
    InfillRequest,
    budgets,
    candidate_spans,
    span_reach,
)
from .scheduler import Priority

EXTRA_TOKENS = 512  # other files' chunks, unless the caller says otherwise


@dataclass(frozen=True)
class Hole:
    """A hole in `text` to plan and fill: the cursor at `offset`, or the selection
    [offset, end) that the fill replaces (its text is not context). `candidates` fills of
    different initial spans (request.candidate_spans: the plan's span, twice and half of it);
    `params.span` is "auto" unless the caller fixed one. `priority` is the caller's (`invoked`,
    `automatic`, `command`); `cancel` stops it; `tree`: the document's tree-sitter tree of
    `text`, when the caller keeps one. `extra`: other files' (path, text) chunks, the most
    relevant last, placed before the prefix within `extra_tokens` of their own. `drafts`: the
    caller's own (a workspace index's) for the cursor; `drafting`: look for more in the text and
    the chunks (drafts/); `renamed`: names the caller's edit history renamed where the cursor is,
    (old, new) (edits/renames.py), which the drafts and the decision read as the new names.
    `deadline_ms`: give up if not started by then.

    The defaults are the native call's (service/native.py), so a caller names only what it sets.
    """

    text: str
    offset: int
    end: int | None = None
    language_id: str = "plaintext"
    priority: Priority = "automatic"
    candidates: int = 1
    prefix_tokens: int = PREFIX_TOKENS  # context budgets, before the plan fits them to the model
    suffix_tokens: int = SUFFIX_TOKENS
    params: InfillParams = DEFAULT_PARAMS
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)
    tree: Any | None = field(default=None, compare=False)
    extra: tuple[tuple[str, str], ...] = ()
    extra_tokens: int = EXTRA_TOKENS
    drafts: tuple[drafts.Draft, ...] = ()
    drafting: bool = True
    renamed: tuple[tuple[str, str], ...] = ()
    deadline_ms: float | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.offset <= len(self.text):
            raise ValueError(f"offset {self.offset} is outside the text (0 to {len(self.text)})")
        if self.end is not None and not self.offset <= self.end <= len(self.text):
            raise ValueError(f"end {self.end} is outside [offset, len(text)]")
        if self.candidates < 1:
            raise ValueError(f"candidates must be at least 1, got {self.candidates}")
        if min(self.prefix_tokens, self.suffix_tokens, self.extra_tokens) < 0:
            raise ValueError("token budgets must not be negative")

    @property
    def after(self) -> int:
        """Where the text after the hole starts: the selection's end, else the cursor."""
        return self.offset if self.end is None else self.end


@dataclass
class Prepared:
    """What `prepare` made of a hole: the plan (its budgets the ones the context was cut to),
    the context, one row per candidate span, and the drafts for the cursor, best first."""

    plan: planner.SpanPlan
    context: Context
    requests: list[InfillRequest]
    drafts: list[drafts.Draft] = field(default_factory=list)


def row_params(hole: Hole, plan: planner.SpanPlan) -> list[InfillParams]:
    """Each candidate row's params: its own initial span (and seed, when sampling)."""
    p = hole.params
    base = p.span if isinstance(p.span, int) else plan.span
    if p.temperature > 0:  # samples of the planned span, each with its own seed
        spans = candidate_spans(base, p.max_span, 1) * hole.candidates
    else:  # greedy fills differ by their span: the planned one, twice and half of it
        spans = candidate_spans(base, p.max_span, hole.candidates)
    return [
        dataclasses.replace(
            p,
            span=s,
            max_span=max(s, p.max_span),
            min_tokens=min(s, p.min_tokens),
            seed=None if p.seed is None else p.seed + i,
        )
        for i, s in enumerate(spans)
    ]


def prepare(engine: Any, hole: Hole) -> Prepared:
    """Plan, cut and tokenize, and build the rows: on the service's encoder thread, or the
    language server's planning thread (with the document's tree). A selection's own text is not
    context: the model sees the text around [offset, end)."""
    p, positions = hole.params, engine.args.max_positions
    plan = planner.plan(
        hole.text,
        hole.offset,
        hole.language_id,
        engine.encode,
        end=hole.end,
        tree=hole.tree,
        max_positions=positions,
        prefix_tokens=hole.prefix_tokens,
        suffix_tokens=hole.suffix_tokens,
        max_span=p.max_span,
        block_size=p.block_size,
    )
    params = row_params(hole, plan)
    # The context is cut once, for the row that may reach furthest (a 2x candidate, or growth
    # up to the plan's max_span): no row's context is trimmed again, nor its suffix end cut
    # by its growth.
    reach = max(span_reach(int(q.span), plan.max_span, q.max_span) for q in params)
    pre, suf = budgets(positions, reach, hole.prefix_tokens, hole.suffix_tokens)
    plan = dataclasses.replace(plan, prefix_tokens=pre, suffix_tokens=suf)
    tokenizer = engine.tokenizer
    if tokenizer is None:
        raise ValueError("the model has no tokenizer")
    text, after = hole.text, hole.after
    joined = text if after == hole.offset else text[: hole.offset] + text[after:]

    def tokenize(s: str) -> Tokens:
        return tokenize_with(tokenizer, s)

    ctx = build_context(joined, hole.offset, tokenize, pre, suf)
    if after != hole.offset:  # the suffix's end, in the text's own coordinates
        ctx = dataclasses.replace(ctx, suffix_end=ctx.suffix_end + after - hole.offset)
    if hole.extra and hole.extra_tokens > 0:
        # the chunks' own budget, within what the context and the furthest reach leave
        used = len(ctx.prefix_ids) + len(ctx.suffix_ids) + reach
        budget = min(hole.extra_tokens, positions - used)
        spec = grammars.spec(hole.language_id)
        comment = spec.line_comment if spec is not None and spec.line_comment else "#"
        ctx = dataclasses.replace(ctx, extra=build_extra(hole.extra, comment, tokenize, budget))
    requests = engine.requests(ctx.model_prefix, ctx.suffix, params, plan, hole.cancel, ctx.ids)
    found: list[drafts.Draft] = []
    if hole.end is None and hole.drafting:
        python = hole.language_id == "python"
        found = drafts.gather(
            text, hole.offset, hole.extra, hole.drafts, python=python, renamed=hole.renamed
        )
    if found and p.speculate != "off":  # the best few, as ids for the decoding (speculate.py)
        ids = tuple(tuple(engine.encode(d.text)) for d in found[: drafts.IN_DECODING])
        requests = [dataclasses.replace(r, drafts=ids) for r in requests]
    return Prepared(plan, ctx, requests, found)
