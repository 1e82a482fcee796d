"""`Engine`: text in, infill out. Tokenises, fits the context, builds canvases, runs the block loop.

The engine owns the device, the dtype and the model; `BlockRunner` (runner.py) owns the decoding
loop; decode policies and caches live in decode.py and cache.py.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .models import DiffusionTransformer
from .params import DEFAULT_THRESHOLD, InfillParams, InfillResult
from .runner import BlockRunner, Observer, Row

DEFAULT_PARAMS = InfillParams()


@dataclass(frozen=True)
class InfillRequest:
    prefix: str
    suffix: str
    params: InfillParams = DEFAULT_PARAMS
    cancel: threading.Event | None = None


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


def fit_context(prefix: list[int], suffix: list[int], room: int) -> tuple[list[int], list[int]]:
    """Trim the far ends (prefix start, suffix end) so prefix + suffix fit in `room` tokens."""
    if len(prefix) + len(suffix) <= room:
        return prefix, suffix
    keep_suffix = min(len(suffix), max(room // 4, room - len(prefix)))
    keep_prefix = room - keep_suffix
    return (prefix[len(prefix) - keep_prefix :] if keep_prefix else []), suffix[:keep_suffix]


class Engine:
    def __init__(
        self,
        model: DiffusionTransformer,
        tokenizer: Any | None,
        mask_id: int,
        end_ids: Sequence[int],
        family: str = "dream",
        path: Path | None = None,
        threshold: float | None = None,
        reserved_ids: Sequence[int] = (),
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        if tokenizer is not None:
            # The engine trims context itself (fit_context); the tokenizer must not warn about it.
            tokenizer.model_max_length = 1 << 60
        self.mask_id = mask_id
        self.end_ids = tuple(end_ids)
        self.family = family
        self.path = path
        # τ for requests that leave it to the model (InfillParams.threshold None)
        self.threshold = DEFAULT_THRESHOLD if threshold is None else threshold
        self.args = model.args
        self.reserved_ids = tuple(reserved_ids)
        self.runner = BlockRunner(model, mask_id, self.end_ids, self.reserved_ids)
        self._lock = threading.Lock()  # one decode loop at a time on this model

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    # -- the contract -----------------------------------------------------------------------------
    @torch.inference_mode()
    def logits(self, input_ids: Tensor) -> Tensor:
        """One full bidirectional pass. [B, L] -> [B, L, V]; logits[:, i] scores the token at i."""
        ids = input_ids.to(self.device)
        positions = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
        raw = self.model(ids, positions)
        if self.args.logits_shift:
            raw = torch.cat([raw[:, :1], raw[:, :-1]], dim=1)
        return raw.float()

    def infill(
        self,
        prefix: str,
        suffix: str,
        params: InfillParams | None = None,
        cancel: threading.Event | None = None,
        observer: Observer | None = None,
    ) -> InfillResult:
        request = InfillRequest(prefix, suffix, params or DEFAULT_PARAMS, cancel)
        return self.infill_batch([request], observer=observer)[0]

    def infill_batch(
        self, requests: Sequence[RequestLike], observer: Observer | None = None
    ) -> list[InfillResult]:
        reqs = [_as_request(r) for r in requests]
        items = []
        for r in reqs:
            span = r.params.span
            if span == "auto":
                span = auto_span(r.prefix, r.suffix, r.params.max_span)
            items.append((self.encode(r.prefix), self.encode(r.suffix), span, r.params, r.cancel))
        return self.infill_ids(items, observer=observer)

    # -- token-level entry (bench, evaluation, random-init models without a tokenizer) ------------
    def infill_ids(
        self,
        items: Sequence[tuple[list[int], list[int], int, InfillParams, threading.Event | None]],
        observer: Observer | None = None,
    ) -> list[InfillResult]:
        rows = [self._row(*item) for item in items]
        with self._lock:
            self.runner.run(rows, observer=observer)
        return [self._result(row) for row in rows]

    def refine(
        self,
        prefix: str,
        text: str,
        suffix: str,
        fraction: float = 0.25,
        params: InfillParams | None = None,
        cancel: threading.Event | None = None,
    ) -> RefineResult:
        """Edit `text` in place: remask its least likely tokens and predict them again.

        One full pass scores every token of `text` in its context; the `fraction` with the lowest
        probability of being what they are become masks, and the block loop re-predicts only
        those. The rest of the text stays as the user wrote it. No autoregressive model can do
        this edit: it needs the suffix and the text's own later tokens at once.
        """
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
        ids = self.encode(text)
        if not ids:
            raise ValueError("nothing to refine: the text is empty")
        base = params or DEFAULT_PARAMS
        # No end token may land inside: the end rule would erase the user's text after it.
        n_ids = len(ids)
        p = replace(base, span=n_ids, max_span=max(base.max_span, n_ids), min_tokens=n_ids)
        row = self._row(self.encode(prefix), self.encode(suffix), n_ids, p, cancel)
        lo, hi = row.span_start, row.span_end
        row.canvas[lo:hi] = torch.tensor(ids, device=row.canvas.device)
        with self._lock:
            logp = torch.log_softmax(self.logits(row.canvas[None])[0, lo:hi], dim=-1)
            mine = logp.gather(1, row.canvas[lo:hi, None].to(logp.device))[:, 0]
            n = max(1, round(fraction * n_ids))
            worst = torch.topk(-mine, n).indices.to(row.canvas.device)
            row.canvas[lo + worst] = self.mask_id
            self.runner.run([row])
        new = row.canvas[lo:hi].tolist()
        kept = [t for t in new if t not in self.end_ids and t != self.mask_id]
        return RefineResult(
            text=self.decode_ids(kept),
            remasked=sorted(int(i) for i in worst.tolist()),
            changed=sum(a != b for a, b in zip(ids, new, strict=True)),
            nfe=row.nfe_full + row.nfe_block + 1,
            stop_reason=row.stop_reason or "span_full",
            token_ids=new,
        )

    def encode(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise ValueError("this engine has no tokenizer; use infill_ids with token ids")
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def decode_ids(self, ids: Sequence[int]) -> str:
        if self.tokenizer is None or not ids:
            return ""
        return str(self.tokenizer.decode(list(ids), clean_up_tokenization_spaces=False))

    # -- internals ------------------------------------------------------------------------------
    def _row(
        self,
        prefix: list[int],
        suffix: list[int],
        span: int,
        params: InfillParams,
        cancel: threading.Event | None,
    ) -> Row:
        limit = self.args.max_positions
        if span > limit:
            raise ValueError(f"span {span} exceeds the model's {limit} positions")
        prefix, suffix = fit_context(prefix, suffix, limit - span)
        if params.threshold is None:
            params = replace(params, threshold=self.threshold)
        canvas = torch.tensor(prefix + [self.mask_id] * span + suffix, dtype=torch.long)
        generator = None
        if params.temperature > 0:
            generator = torch.Generator(device=self.device)
            if params.seed is not None:
                generator.manual_seed(params.seed)
            else:
                generator.seed()
        return Row(
            canvas=canvas.to(self.device),
            span_start=len(prefix),
            span_end=len(prefix) + span,
            params=params,
            cancel=cancel,
            generator=generator,
        )

    def _result(self, row: Row) -> InfillResult:
        stop = row.end_at if row.end_at is not None else row.span_end
        ids = [t for t in row.canvas[row.span_start : stop].tolist() if t != self.mask_id]
        if row.stop_reason is None:
            raise RuntimeError("the block loop returned an unfinished row")
        return InfillResult(
            text=self.decode_ids(ids),
            tokens=row.committed,
            nfe_full=row.nfe_full,
            nfe_block=row.nfe_block,
            elapsed_ms=row.elapsed_ms,
            stop_reason=row.stop_reason,
            token_ids=ids,
            span=row.span_end - row.span_start,
        )


@dataclass(frozen=True)
class RefineResult:
    text: str  # the edited text
    remasked: list[int]  # token positions (within the text) that were predicted again
    changed: int  # how many of them now hold a different token
    nfe: int  # forward passes, the scoring pass included
    stop_reason: str
    token_ids: list[int]  # the edited text's ids, one per original token


def _as_request(r: RequestLike) -> InfillRequest:
    if isinstance(r, InfillRequest):
        return r
    if len(r) == 2:
        return InfillRequest(r[0], r[1])
    if len(r) == 3:
        return InfillRequest(r[0], r[1], r[2] or DEFAULT_PARAMS)
    raise ValueError(f"a request is (prefix, suffix[, params]); got {len(r)} items")
