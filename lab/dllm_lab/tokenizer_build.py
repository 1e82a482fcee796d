"""Byte-level BPE tokenizer of the builtin model, trained with the `tokenizers` library.

Owns the special tokens (`<|endoftext|>` = id 0, `<|mask|>` = id 1, DreamOn's `<|expand|>` = 2
and `<|delete|>` = 3) and the pre-tokenisation
that keeps code whitespace cheap: runs of spaces, newline + indentation and identifiers become
their own pre-tokens. Byte-level encoding makes decode(encode(s)) == s for any string.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

END_TOKEN = "<|endoftext|>"
MASK_TOKEN = "<|mask|>"
# DreamOn's variable-length tokens: a mask decoded as <|expand|> becomes two masks, one decoded
# as <|delete|> is removed. Reserved at ids 2 and 3 and recorded in config.json.
EXPAND_TOKEN = "<|expand|>"
DELETE_TOKEN = "<|delete|>"
SPECIAL_TOKENS = (END_TOKEN, MASK_TOKEN, EXPAND_TOKEN, DELETE_TOKEN)

# newline(s) followed by indentation | runs of spaces/tabs | words with one optional leading space
# | numbers | single punctuation characters with an optional leading space.
SPLIT_PATTERN = (
    r"\n+[ \t]*|[ \t]+(?=[ \t])|[ \t]+$|"
    r" ?[A-Za-z_\u00c0-\uffff][A-Za-z0-9_\u00c0-\uffff]*|"
    r" ?[0-9]+|"
    r" ?[^\sA-Za-z0-9_\u00c0-\uffff]{1,3}|\s"
)


def new_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192) -> Tokenizer:
    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def save_tokenizer(tok: Tokenizer, out_dir: Path, model_max_length: int = 4096) -> None:
    """tokenizer.json + tokenizer_config.json + special_tokens_map.json for AutoTokenizer."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    specials = {"eos_token": END_TOKEN, "pad_token": END_TOKEN, "mask_token": MASK_TOKEN}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
        **specials,
        "bos_token": END_TOKEN,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    smap = {**specials, "bos_token": END_TOKEN}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(smap, indent=2) + "\n")
