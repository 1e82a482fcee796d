"""What distinguishes one model family from another: config parsing, checkpoint names, special ids.

A `Family` is data plus two small functions; the network itself is always `DiffusionTransformer`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .common import ModelArgs


def require(config: Mapping[str, Any], key: str, family: str) -> Any:
    if key not in config:
        raise ValueError(f"config.json of a {family} model lacks the field {key!r}")
    return config[key]


def as_id_list(value: Any) -> list[int]:
    """`eos_token_id` may be an int, a list of ints, or null."""
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    parse_args: Callable[[Mapping[str, Any]], ModelArgs]
    # (checkpoint-name regex, our-name template) pairs, tried in order.
    renames: tuple[tuple[str, str], ...]
    default_mask_id: int | None
    # End tokens beyond the config's eos/pad, e.g. LLaDA's <|eot_id|>.
    extra_end_ids: tuple[int, ...] = ()
    # A further test on config.json where two layouts share a model_type (LLaDA-MoE's
    # released config says "llada", like the dense LLaDA's).
    accepts: Callable[[Mapping[str, Any]], bool] | None = None
    # True: a stored lm_head.weight is used even when the config ties it to the embedding
    # (CoDA's modeling code never ties, whatever tie_word_embeddings says).
    stored_head_wins: bool = False
    # (our-name regex, part templates): a tensor stored fused, e.g. LLaDA2's query_key_value
    # renamed to `self_attn.qkv_proj`, is split along dim 0 into these parts in order, each as
    # long as its expected shape says.
    fused: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # True: the stored embedding and output layer may have rows past the vocabulary (MMaDA's
    # image codes after its text tokens); only the first vocab_size rows are kept.
    text_rows: bool = False

    def matches(self, config: Mapping[str, Any]) -> bool:
        if config.get("model_type") not in self.model_types:
            return False
        return self.accepts is None or self.accepts(config)

    def our_name(self, checkpoint_key: str) -> str | None:
        """Map a checkpoint tensor name to our parameter name; None = not ours (ignored)."""
        for pattern, template in self.renames:
            m = re.fullmatch(pattern, checkpoint_key)
            if m:
                return m.expand(template)
        return None

    def parts(self, name: str) -> list[str] | None:
        """The parameters a fused tensor of ours splits into; None = not a fused name."""
        for pattern, templates in self.fused:
            m = re.fullmatch(pattern, name)
            if m:
                return [m.expand(t) for t in templates]
        return None
