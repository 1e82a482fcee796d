"""Per-request settings (`InfillParams`) and the result of one infill (`InfillResult`).

Both are frozen dataclasses; `InfillParams` is validated at construction with `ValueError`, so a
bad setting is reported where it is made and never reaches the decode loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .fields import is_finite, is_int, is_number

DecodePolicy = Literal["threshold", "factor", "fixed"]
CacheMode = Literal["dual", "prefix", "none"]
SpeculateMode = Literal["off", "exact", "fast"]
StopReason = Literal["end_token", "span_full", "cancelled", "syntax"]

DECODE_POLICIES: tuple[str, ...] = ("threshold", "factor", "fixed")
CACHE_MODES: tuple[str, ...] = ("dual", "prefix", "none")
SPECULATE_MODES: tuple[str, ...] = ("off", "exact", "fast")
MAX_LOOKAHEAD = 16
DEFAULT_THRESHOLD = 0.9  # Fast-dLLM's τ, for models that recommend none


def threshold_or_default(tau: float | None) -> float:
    """τ as asked (a request's, or the one a model directory recommends), else Fast-dLLM's."""
    return DEFAULT_THRESHOLD if tau is None else tau


# Sampling runs in float32, where a tiny positive value is zero or overflows: a temperature of
# 1e-40 (logits / temperature = inf) or a top_p of 1e-320 (0 in float32: every token dropped)
# made every probability NaN and failed the whole batch step, other clients' rows included.
# Below these floors sampling is greedy anyway (temperature 0 is greedy). A temperature past
# float32's range (1e308) is inf there, and the masked logits' -inf / inf is NaN: the same
# failure. Above the ceiling sampling is uniform over the vocabulary anyway.
MIN_TEMPERATURE = 1e-6
MAX_TEMPERATURE = 100.0
MIN_TOP_P = 1e-6


@dataclass(frozen=True)
class InfillParams:
    # Masked positions placed between prefix and suffix: an int, or "auto" (a planner decides;
    # the engine alone uses a line/indent heuristic). Always a budget: the span may end early.
    span: int | Literal["auto"] = "auto"
    max_span: int = 512
    block_size: int = 32  # positions decoded together, left to right (semi-autoregressive)
    decode: DecodePolicy = "threshold"
    # tau for "threshold": commit every position with p_top1 >= tau. None: the tau the model
    # directory recommends (generation_config.json), else DEFAULT_THRESHOLD.
    threshold: float | None = None
    factor: float = 1.0  # f for "factor": commit the top n while (n+1)(1 - p_n) < f
    steps_per_block: int | None = None  # "fixed": steps per block; None = one token per step
    cache: CacheMode = "dual"
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int | None = None
    # End tokens are never proposed at the first min_tokens span positions, so the completion has
    # at least that many tokens. An editor sets 1: an empty completion is never useful there.
    min_tokens: int = 0
    # DreamOn's variable-length decoding, for a model whose tokenizer has <|expand|> and
    # <|delete|>: a committed expand becomes two masks (up to max_span), a delete removes its
    # position. Ignored for a model without them.
    expand: bool = False
    # Guessed next states checked in the same window pass (speculate.py): "exact" gives plain
    # decoding's tokens in fewer passes; "fast" also commits a draft the model predicts back
    # (differs from plain decoding). `lookahead`: the guesses a row brings to each window pass.
    # Only inside cached blocks (dual or prefix cache).
    speculate: SpeculateMode = "off"
    lookahead: int = 4

    def __post_init__(self) -> None:
        if self.span != "auto" and (not is_int(self.span) or self.span < 1):
            raise ValueError(f"span must be a positive int or 'auto', got {self.span!r}")
        if not is_int(self.max_span) or self.max_span < 1:
            raise ValueError(f"max_span must be a positive int, got {self.max_span!r}")
        if isinstance(self.span, int) and self.span > self.max_span:
            raise ValueError(f"span {self.span} exceeds max_span {self.max_span}")
        if not is_int(self.block_size) or self.block_size < 1:
            raise ValueError(f"block_size must be a positive int, got {self.block_size!r}")
        if self.decode not in DECODE_POLICIES:
            raise ValueError(f"decode must be one of {DECODE_POLICIES}, got {self.decode!r}")
        if self.cache not in CACHE_MODES:
            raise ValueError(f"cache must be one of {CACHE_MODES}, got {self.cache!r}")
        if self.threshold is not None and not is_finite(self.threshold):
            raise ValueError(f"threshold must be a finite number, got {self.threshold!r}")
        if not (is_finite(self.factor) and self.factor > 0):
            raise ValueError(f"factor must be a positive finite number, got {self.factor!r}")
        if self.steps_per_block is not None and (
            not is_int(self.steps_per_block) or self.steps_per_block < 1
        ):
            raise ValueError(f"steps_per_block must be a positive int, got {self.steps_per_block}")
        if not (
            is_finite(self.temperature)
            and (self.temperature == 0 or MIN_TEMPERATURE <= self.temperature <= MAX_TEMPERATURE)
        ):
            raise ValueError(
                f"temperature must be 0 (greedy) or a number from {MIN_TEMPERATURE:g} to "
                f"{MAX_TEMPERATURE:g}, got {self.temperature!r}"
            )
        if not (is_number(self.top_p) and MIN_TOP_P <= self.top_p <= 1):
            raise ValueError(f"top_p must be in [{MIN_TOP_P:g}, 1], got {self.top_p!r}")
        if not is_int(self.min_tokens):
            raise ValueError(f"min_tokens must be an int >= 0, got {self.min_tokens!r}")
        if self.min_tokens < 0 or (isinstance(self.span, int) and self.min_tokens > self.span):
            raise ValueError(f"min_tokens must be in [0, span], got {self.min_tokens!r}")
        if not isinstance(self.expand, bool):
            raise ValueError(f"expand must be a bool, got {self.expand!r}")
        if self.speculate not in SPECULATE_MODES:
            raise ValueError(f"speculate must be one of {SPECULATE_MODES}, got {self.speculate!r}")
        if not is_int(self.lookahead) or not 0 <= self.lookahead <= MAX_LOOKAHEAD:
            raise ValueError(
                f"lookahead must be an int in [0, {MAX_LOOKAHEAD}], got {self.lookahead!r}"
            )


@dataclass(frozen=True)
class InfillResult:
    text: str  # the completion; it stops where the model placed an end token
    tokens: int  # span positions committed by model decisions (end-token fill excluded)
    nfe_full: int  # forward passes over the whole canvas
    nfe_block: int  # forward passes over the current block (or block..end) against the cache
    elapsed_ms: float
    stop_reason: StopReason
    token_ids: list[int] = field(default_factory=list)  # the completion's ids, end tokens dropped
    span: int = 0  # the span's length at the end (after any growth and expand/delete)
    grown: int = 0  # masks appended because the construct was still open when the span filled
    edits: int = 0  # expand/delete edits applied
    verified: int = 0  # steps taken on a guessed state's logits, with no pass of their own
    drafted: int = 0  # tokens committed from a draft the model predicted back (fast mode)

    @property
    def nfe(self) -> int:
        return self.nfe_full + self.nfe_block


@dataclass(frozen=True)
class RefineResult:
    """What `Engine.refine` made of a selection."""

    text: str  # the edited text
    remasked: list[int]  # token positions (within the text) that were predicted again
    changed: int  # how many of them now hold a different token
    nfe: int  # forward passes, the scoring pass included
    stop_reason: str
    token_ids: list[int]  # the edited text's ids, one per original token
