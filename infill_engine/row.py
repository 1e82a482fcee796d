"""A request's progress through the block loop: `Row` (canvas, span, block, counters, the stop
rule's state) and `RowRequest` (what was asked: it never changes while the row decodes), and
the `StepEvent` an observer sees after each step."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .params import InfillParams, StopReason

# the committed head of a span (token ids, in order) -> how many of them to keep, once the
# construct the span fills has ended; None while it is still open
StopFn = Callable[[list[int]], int | None]


@dataclass(frozen=True)
class RowRequest:
    """What a row was asked to do: it never changes while the row decodes."""

    params: InfillParams
    cancel: threading.Event | None = None  # checked before every step
    generator: torch.Generator | None = None  # the random stream of sampling (temperature > 0)
    limit: int = 0  # the model's positions: the canvas never grows past them (0: no limit)
    variable: bool = False  # DreamOn expand/delete decoding
    # candidate ids for the span from its first position (speculate.py: fast mode and guesses)
    drafts: tuple[Tensor, ...] = ()


@dataclass
class Row:
    """A request's progress through the block loop."""

    canvas: Tensor  # [L] token ids on the model's device
    span_start: int
    span_end: int
    request: RowRequest
    block_start: int = 0
    step: int = 0  # steps taken in the current block
    fresh_block: bool = True  # the next pass must be a full one (it refreshes the cache)
    committed: int = 0
    nfe_full: int = 0
    nfe_block: int = 0
    stop_reason: StopReason | None = None
    elapsed_ms: float = 0.0
    joined_at: float = 0.0  # time.perf_counter() when it joined a batch
    slot: int = 0  # this row's index in the KVCache
    end_at: int | None = None  # canvas position of the first end token in the span
    trace: list[int] = field(default_factory=list)  # tokens committed per step
    # a span whose length may move: up to max_span masks in all (raised to the initial span)
    max_span: int = 0  # 0: the span keeps the length it starts with
    stop: StopFn | None = None  # the construct's end; growth needs it (dropped if it gives way)
    cut: bool = False  # the stop rule ended the span
    checked: int = 0  # the head length the stop rule last saw
    grown: int = 0  # masks appended by growth
    edits: int = 0  # expand/delete edits applied
    error: BaseException | None = None  # why the row failed alone (its stop_reason: "cancelled")
    # the last pass's argmax and confidence over the current block (guesses start from them)
    seen: tuple[Tensor, Tensor] | None = None
    verified: int = 0  # steps taken on a guess's logits, with no pass of their own
    drafted: int = 0  # tokens committed from a draft the model predicted back (fast mode)

    def __post_init__(self) -> None:
        self.block_start = self.span_start
        self.max_span = max(self.max_span, self.span_end - self.span_start)

    @property
    def length(self) -> int:
        return int(self.canvas.shape[0])

    @property
    def block_end(self) -> int:
        return min(self.block_start + self.request.params.block_size, self.span_end)

    @property
    def uses_cache(self) -> bool:
        return self.request.params.cache != "none"

    @property
    def span_len(self) -> int:
        return self.span_end - self.span_start

    @property
    def can_expand(self) -> bool:
        """Room for one more span position: under max_span, and before the model's last
        position (the far suffix end gives way, as in growth)."""
        limit = self.request.limit
        return self.span_len < self.max_span and (not limit or self.span_end < limit)

    @property
    def max_length(self) -> int:
        """The longest canvas this row can reach: its K/V room in the cache."""
        longest = self.length + self.max_span - self.span_len
        limit = self.request.limit
        return max(self.length, min(longest, limit) if limit else longest)

    def head_ids(self, mask_id: int) -> list[int]:
        """The committed head of the span: its ids from the start up to the first mask or end
        token, which no later step changes (but an expand/delete edit's)."""
        end = self.end_at if self.end_at is not None else self.span_end
        head = self.canvas[self.span_start : end]
        masks = (head == mask_id).nonzero()
        n = int(masks[0, 0]) if masks.numel() else int(head.numel())
        return [int(t) for t in head[:n].tolist()]


@dataclass(frozen=True)
class StepEvent:
    """What the loop looks like after a step; handed to an observer (tests, progress)."""

    step: int
    active: int  # rows still decoding
    cache_rows: int  # rows the KVCache still holds
    cache_bytes: int


Observer = Callable[[StepEvent], None]
