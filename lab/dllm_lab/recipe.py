"""The training recipe as frozen, validated dataclasses: `TrainConfig` and its parts.

`train_config.json` (beside this file) is the one source of the defaults; its layout is
`{seed, corpus, tokenizer: {vocab_size}, model, train}` and is also what `training_meta.json`
records, so a trained directory says exactly how it was made. Unknown keys and out-of-range
values are a `ValueError`, not a silent default.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

DEFAULT_CONFIG = Path(__file__).with_name("train_config.json")
OBJECTIVES = ("ar", "diffusion")

_T = TypeVar("_T")


def _build(cls: type[_T], data: dict[str, Any], where: str) -> _T:
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(known)}")
    return cls(**data)


@dataclass(frozen=True)
class CorpusSpec:
    sources: tuple[str, ...] = ("stdlib",)
    package_mb: float | None = None  # cap per top-level site-packages package
    heldout_percent: int = 3
    max_files: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(self.sources))
        if not self.sources:
            raise ValueError("corpus.sources must name at least one source")
        if not 0 <= self.heldout_percent < 100:
            raise ValueError(
                f"corpus.heldout_percent must be in [0, 100), got {self.heldout_percent}"
            )


@dataclass(frozen=True)
class ModelSpec:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 384
    tie_word_embeddings: bool = True

    def __post_init__(self) -> None:
        for f in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"model.{f} must be positive")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("model.hidden_size must be a multiple of num_attention_heads")


@dataclass(frozen=True)
class Schedule:
    """One training stage: the objective, the batch shape, the optimiser and the row mix."""

    objective: str = "diffusion"  # "ar": causal next-token; "diffusion": masked + infill rows
    seq_len: int = 192
    batch_size: int = 16
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 50
    weight_decay: float = 0.05
    grad_clip: float = 1.0
    steps: int = 100000
    minutes: float = 30.0  # wall-clock budget; the cosine follows whichever ends first
    infill_fraction: float = 0.6
    max_span: int = 96
    max_extra: int = 48
    end_pad_weight: float = 0.2
    first_end_weight: float = 1.0  # loss weight of the first end token of an infill row
    mask_end_run: bool = False  # a masked first end token hides the end tokens after it too
    expand_fraction: float = 0.0  # share of infill rows whose span is too short (DreamOn expand)
    oracle_fraction: float = 0.25
    repo_fraction: float = 0.0  # share of rows led by other files of the same package (sampler)
    # share of infill rows whose middle is a line that stands verbatim elsewhere in the window
    # (the sampler's copy rows: the model learns to copy what the context already says)
    copy_fraction: float = 0.0
    stratified_t: bool = True  # one mask level per stratum of the batch (MDLM); False: iid U(0,1)
    checkpoint_minutes: float = 5.0
    threads: int = 2

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"train.objective must be one of {OBJECTIVES}, got {self.objective!r}")
        for f in ("seq_len", "batch_size", "steps", "threads", "max_span"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"train.{f} must be positive, got {getattr(self, f)}")
        for f in (
            "infill_fraction",
            "end_pad_weight",
            "oracle_fraction",
            "min_lr_ratio",
            "expand_fraction",
            "repo_fraction",
            "copy_fraction",
        ):
            if not 0.0 <= float(getattr(self, f)) <= 1.0:
                raise ValueError(f"train.{f} must be in [0, 1], got {getattr(self, f)}")
        if self.first_end_weight <= 0:
            raise ValueError("train.first_end_weight must be positive")
        if self.lr <= 0 or self.minutes <= 0:
            raise ValueError("train.lr and train.minutes must be positive")


@dataclass(frozen=True)
class TrainConfig:
    seed: int
    corpus: CorpusSpec
    vocab_size: int
    model: ModelSpec
    train: Schedule

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        unknown = set(data) - {"seed", "corpus", "tokenizer", "model", "train"}
        if unknown:
            raise ValueError(f"train config: unknown sections {sorted(unknown)}")
        tok = dict(data.get("tokenizer", {}))
        if set(tok) - {"vocab_size"}:
            raise ValueError(f"tokenizer: unknown keys {sorted(set(tok) - {'vocab_size'})}")
        return cls(
            seed=int(data.get("seed", 0)),
            corpus=_build(CorpusSpec, dict(data.get("corpus", {})), "corpus"),
            vocab_size=int(tok.get("vocab_size", 4096)),
            model=_build(ModelSpec, dict(data["model"]), "model"),
            train=_build(Schedule, dict(data.get("train", {})), "train"),
        )

    @classmethod
    def load(cls, path: Path | None = None) -> TrainConfig:
        return cls.from_dict(json.loads((path or DEFAULT_CONFIG).read_text()))

    def to_dict(self) -> dict[str, Any]:
        corpus = dataclasses.asdict(self.corpus)
        corpus["sources"] = list(self.corpus.sources)
        return {
            "seed": self.seed,
            "corpus": corpus,
            "tokenizer": {"vocab_size": self.vocab_size},
            "model": dataclasses.asdict(self.model),
            "train": dataclasses.asdict(self.train),
        }

    def with_train(self, **changes: Any) -> TrainConfig:
        """A copy with some schedule fields changed (validated again)."""
        return dataclasses.replace(self, train=dataclasses.replace(self.train, **changes))
