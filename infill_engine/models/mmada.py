"""MMaDA family (model_type "mmada"): Gen-Verse's MMaDA-8B Base/MixCoT, read for its text path.

MMaDA is LLaDA's network under another model_type, trained further with image tokens. The public
code (Gen-Verse/MMaDA) shows it: `MMadaModelLM` subclasses `LLaDAModelLM` (the same modules under
`model.transformer.`, OLMo names), its config is LLaDA-8B-Instruct's config.json merged with the
multimodal keys (`llm_vocab_size` 126464, `codebook_size` 8192, `num_vq_tokens`,
`new_vocab_size` 134656), and its training resizes the embedding and the output layer to
`new_vocab_size` rows: the text vocabulary first, then the image codes. Text generation is
LLaDA's: mask 126336, bidirectional attention, no logits shift.

So it loads as LLaDA with the vocabulary cut to `llm_vocab_size`: the image-code rows of the
embedding and the output layer are dropped as they are read (`Family.text_rows`), so a text fill
can never commit an image token and the confidences the threshold rule reads are over text
tokens only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fields import is_int
from .common import ModelArgs
from .family import Family
from .llada import LLADA_RENAMES, parse_llada_args


def parse_mmada_args(config: Mapping[str, Any]) -> ModelArgs:
    text = config.get("llm_vocab_size")
    if text is None:
        return parse_llada_args(config)
    if not is_int(text) or text < 1:
        raise ValueError(f"MMaDA llm_vocab_size must be a positive integer, got {text!r}")
    return parse_llada_args({**config, "vocab_size": text, "embedding_size": text})


MMADA = Family(
    name="mmada",
    model_types=("mmada",),
    parse_args=parse_mmada_args,
    renames=LLADA_RENAMES,
    default_mask_id=126336,
    extra_end_ids=(126348,),
    text_rows=True,
)
