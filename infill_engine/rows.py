"""`Rows`: requests become rows, and rows become results. The one place where an encoded
`InfillRequest` turns into a `Row` of the block loop (its canvas, its random stream, its stop
function on token ids) and where a finished row turns back into an `InfillResult` (its ids
decoded, the construct's rule applied to the text), and where a live row's committed leading
text (its head, what a streaming caller sees) is read.

The engine owns one `Rows` (`Engine.rows`), built from what the conversion needs of it: the
mask id, the default threshold, the model's positions and device, the tokenizer's decoding and
the watchdog that bounds a request's own code. The live batch converts through it; tests and
tools that drive the runner directly do too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from .params import InfillResult, RefineResult
from .request import InfillRequest, fit_context
from .row import Row, RowRequest, StopFn
from .stop import StopRule
from .watchdog import Watchdog

Decode = Callable[[Sequence[int]], str]  # token ids -> text (the tokenizer's decoding)


class Rows:
    """Request -> `Row` -> `InfillResult`, for one engine's model and tokenizer."""

    def __init__(
        self,
        mask_id: int,
        threshold: float,
        limit: int,
        device: torch.device,
        decode: Decode,
        watchdog: Watchdog,
        variable: bool = False,
    ) -> None:
        self.mask_id = mask_id
        self.threshold = threshold  # τ for requests that leave it to the model
        self.limit = limit  # the model's positions: context and span together
        self.device = device  # the model's: the engine's canvases and random streams live there
        self.decode = decode
        self.watchdog = watchdog
        self.variable = variable  # the model has DreamOn's expand/delete tokens

    def check(self, request: InfillRequest) -> None:
        """Raise ValueError for a request no row can hold: before it is queued, and again
        as it becomes a row."""
        if request.span > self.limit:
            raise ValueError(f"span {request.span} exceeds the model's {self.limit} positions")
        if request.fill is not None and len(request.fill) != request.span:
            raise ValueError(f"a fill of {len(request.fill)} ids for a span of {request.span}")

    def row(self, r: InfillRequest) -> Row:
        """The request's row: canvas prefix | span | suffix on the model's device."""
        self.check(r)
        prefix, suffix = fit_context(list(r.prefix_ids), list(r.suffix_ids), self.limit - r.span)
        params = r.params
        if params.threshold is None:
            params = replace(params, threshold=self.threshold)
        span = list(r.fill) if r.fill is not None else [self.mask_id] * r.span
        device = self.device
        canvas = torch.tensor(prefix + span + suffix, dtype=torch.long)
        generator = None
        if params.temperature > 0:
            generator = torch.Generator(device=device)
            if params.seed is not None:
                generator.manual_seed(params.seed)
            else:
                generator.seed()
        variable = params.expand and self.variable
        drafts = tuple(torch.tensor(d, dtype=torch.long, device=device) for d in r.drafts if d)
        return Row(
            canvas=canvas.to(device),
            span_start=len(prefix),
            span_end=len(prefix) + r.span,
            request=RowRequest(params, r.cancel, generator, self.limit, variable, drafts),
            max_span=r.max_span,
            stop=self.stop_fn(r.stop) if r.stop is not None and r.stop.kind != "none" else None,
        )

    def stop_fn(self, rule: StopRule) -> StopFn:
        """The rule on token ids: how many ids to keep so that their text reaches the cut."""

        def keep(ids: list[int]) -> int | None:
            with self.watchdog.guard():
                cut = rule.cut(self.decode(ids))
                if cut is None:
                    return None
                lo, hi = 0, len(ids)  # the fewest ids whose text is at least `cut` long
                while lo < hi:
                    mid = (lo + hi) // 2
                    if len(self.decode(ids[:mid])) >= cut:
                        hi = mid
                    else:
                        lo = mid + 1
                return lo

        return keep

    def result(self, row: Row, request: InfillRequest) -> InfillResult:
        """The ended row's result; raises the error that failed the row alone."""
        if row.error is not None:
            raise row.error
        stop = row.end_at if row.end_at is not None else row.span_end
        ids = [t for t in row.canvas[row.span_start : stop].tolist() if t != self.mask_id]
        if row.stop_reason is None:
            raise RuntimeError("the block loop returned an unfinished row")
        text = self.decode(ids)
        if request.stop is not None:
            with self.watchdog.guard():  # the request's own rule, as inside a step
                if row.cut:
                    cut = request.stop.cut(text)
                    text = text if cut is None else text[:cut]  # the last id may run past the end
                if row.stop_reason != "cancelled":
                    text = request.stop.close(text)
        return InfillResult(
            text=text,
            tokens=row.committed,
            nfe_full=row.nfe_full,
            nfe_block=row.nfe_block,
            elapsed_ms=row.elapsed_ms,
            stop_reason=row.stop_reason,
            token_ids=ids,
            span=row.span_end - row.span_start,
            grown=row.grown,
            edits=row.edits,
            verified=row.verified,
            drafted=row.drafted,
        )

    def head(self, row: Row, request: InfillRequest) -> str:
        """A live row's committed leading text, which its result's text will begin with: its
        head ids decoded, less what the end may still change: a character whose bytes are not
        all committed and, under a stop rule (a dedent or a brace cuts the whitespace before
        it), trailing whitespace. Nothing once the rule cut it or when edits move its ids."""
        if row.cut or row.request.variable or row.error is not None:
            return ""
        text = self.decode(row.head_ids(self.mask_id)).rstrip("\ufffd")
        return text.rstrip() if row.stop is not None else text


@dataclass(frozen=True)
class Remask:
    """A refine between its scoring pass and its row (`Engine.remask`): the request, whose fill
    is the text's ids with the least likely ones masked, and what the refine reads off its
    result."""

    request: InfillRequest
    ids: tuple[int, ...]  # the text's ids as the user wrote them
    remasked: tuple[int, ...]  # positions (within the text) that were masked

    def result(self, result: InfillResult) -> RefineResult:
        """The refine, from its request's result (an early stop keeps the masked fill)."""
        fill = self.request.fill or ()
        new = result.token_ids if len(result.token_ids) == len(self.ids) else list(fill)
        return RefineResult(
            text=result.text,
            remasked=list(self.remasked),
            changed=sum(a != b for a, b in zip(self.ids, new, strict=True)),
            nfe=result.nfe + 1,  # the scoring pass
            stop_reason=result.stop_reason,
            token_ids=new,
        )
