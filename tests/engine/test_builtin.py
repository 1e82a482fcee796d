"""The shipped builtin model: loads offline, fills a simple hole with parseable code, decodes
greedily exactly what its logits say, and its tokenizer round-trips source text exactly."""

from __future__ import annotations

import ast
import sysconfig
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import greedy_reference
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from infill_engine import Engine, InfillParams, load
from infill_engine.loader import BUILTIN_DIR

TRICKY = [
    "",
    "\n",
    "    \n\t\n",
    "def f(x):\n\tif x:\n\t\treturn x  \n\n\n",
    "s = 'héllo wörld ✓ 日本語 😀'\n",
    "x = [1,  2,   3]    # trailing   \r\n",
    "class A:\n    def m(self):\n        pass\n        \n",
    "\u00a0\u2028 zero\u200bwidth\n",
    "<|mask|> looks special but is text\n",
]


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()  # its scheduler's and watchdog's threads end with the module


def test_builtin_dir_is_complete() -> None:
    names = {p.name for p in BUILTIN_DIR.iterdir()}
    for need in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert need in names
    assert (BUILTIN_DIR / "model.safetensors").stat().st_size < 30 * 1024 * 1024


def test_loads_offline(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    again = load("builtin", device="cpu")
    assert again.family == "dream"
    assert engine.mask_id == engine.tokenizer.convert_tokens_to_ids("<|mask|>")
    assert engine.tokenizer.convert_tokens_to_ids("<|endoftext|>") in engine.end_ids


# Simple holes a useful model fills with code that ends by itself and parses. Since stage 5 the
# v2 model ends all six with an end token; after stage 6 three of the fills parse ("a",
# "self.x" and "path": syntax, not yet useful code; docs/builtin-model.md); the other three are
# expected failures.
# strict=True turns a fill that starts passing into a failure, so the marks cannot go stale.
_NO_END = pytest.mark.xfail(strict=True, reason="v2's fill does not parse (docs/builtin-model.md)")
HOLES = [
    pytest.param("def add(a, b):\n    return ", "\n\n\nprint(add(1, 2))\n"),
    pytest.param("x = [1, 2, 3]\ntotal = ", "\nprint(total)\n", marks=_NO_END),
    pytest.param(  # the `make demo` hole
        'def greet(name):\n    """Return a greeting for name."""\n    ',
        '\n\n\nprint(greet("world"))\n',
        marks=_NO_END,
    ),
    pytest.param(
        "def count(items):\n    n = 0\n    for item in items:\n        ",
        "\n    return n\n",
        marks=_NO_END,
    ),
    pytest.param(
        "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ",
        "\n\n    def norm(self):\n        return (self.x ** 2 + self.y ** 2) ** 0.5\n",
    ),
    ("import os\n\n\ndef exists(path):\n    return ", "\n"),
]


@pytest.mark.parametrize(("prefix", "suffix"), HOLES)
def test_simple_hole_fills_with_parseable_code(engine: Engine, prefix: str, suffix: str) -> None:
    # min_tokens=1, as the editor asks: an empty fill would parse trivially and prove nothing.
    res = engine.infill(prefix, suffix, InfillParams(span=16, cache="dual", min_tokens=1))
    assert res.text.strip(), res
    assert res.stop_reason == "end_token", res  # it chose where to stop
    ast.parse(prefix + res.text + suffix)


def test_masked_tokens_are_predicted_far_above_frequency(engine: Engine) -> None:
    """What v2 does deliver, guarded: on held-out windows it predicts masked tokens at several
    times the unigram baseline (measured: 43.1 % against 3.4-5.3 % at ratio 0.15)."""
    from dllm_lab.evaluate import (
        heldout_texts,
        mask_positions,
        masked_accuracy,
        sample_windows,
        unigram_accuracy,
    )

    windows = sample_windows(engine, heldout_texts(), 16, 128, seed=0)
    pos = mask_positions(windows, 0.15, seed=0)
    acc = masked_accuracy(engine, windows, pos)
    assert acc >= 0.25
    assert acc >= 4 * unigram_accuracy(windows, pos, None)


GREEDY_HOLES = [
    ("def area(w, h):\n    ", "\n"),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ", "\n"),
]


@pytest.mark.parametrize(("prefix", "suffix"), GREEDY_HOLES)
@pytest.mark.parametrize("threshold", [0.9, 0.3])
def test_greedy_decodes_what_the_logits_say(
    engine: Engine, prefix: str, suffix: str, threshold: float
) -> None:
    """Greedy decoding is a function of the model's logits alone: the fill (through the
    scheduler, with its batch and its cache rows) equals a fill recomputed from scratch with a
    full pass per step. A fill that depended on anything else (a random draw, a stale cache row
    or canvas, an earlier request, the threshold of another request) would differ."""
    p = InfillParams(span=24, block_size=8, threshold=threshold, cache="none", min_tokens=12)
    r = engine.infill(prefix, suffix, p)
    assert len(r.token_ids) >= 12 and r.nfe >= 3  # several steps, several blocks
    assert p.threshold is not None
    want = greedy_reference(engine, prefix, suffix, 24, p.block_size, p.threshold, p.min_tokens)
    assert r.token_ids == want
    # the dual cache's fill does not depend on what else shares its batch
    dual = replace(p, cache="dual")
    alone = engine.infill(prefix, suffix, dual)
    others = [
        engine.request("import os\n", "", InfillParams(span=16)),
        engine.request(prefix, suffix, dual),
        engine.request("x = [", "]\n", InfillParams(span=9, cache="prefix")),
    ]
    assert engine.run(others)[1].token_ids == alone.token_ids


@pytest.mark.parametrize("cache", ["dual", "prefix"])
def test_cached_decoding_agrees_with_no_cache(engine: Engine, cache: str) -> None:
    """The DualCache's approximation on the shipped model: greedy fills at the model's τ with the
    cache against `cache="none"` (every pass full), over holes cut from held-out files.
    Agreement is per position, so one early flip shifts the rest of a fill. Measured on the
    stage-5 model: dual [1, 1, 0.64, 0.4, 0.25, 1] (mean 0.71), prefix [1, 1, 1, 0.4, 0.25,
    0.71] (mean 0.73); the bound asks for half the fills identical and a mean of 0.6."""
    from dllm_lab.bench import agreement
    from dllm_lab.evaluate import heldout_lines, heldout_texts

    holes = heldout_lines(heldout_texts(), 6, seed=1)
    scores = []
    for hole in holes:
        prefix, suffix = hole.prefix[-1500:], hole.suffix[:600]
        p = InfillParams(span=48, block_size=16, cache="none")
        base = engine.infill(prefix, suffix, p)
        ours = engine.infill(prefix, suffix, replace(p, cache=cache))
        scores.append(agreement(ours.token_ids, base.token_ids))
    assert sum(scores) / len(scores) >= 0.6, scores
    assert sum(x == 1.0 for x in scores) >= len(scores) // 2, scores


def _stdlib_samples() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return [(root / n).read_text(encoding="utf-8") for n in ("textwrap.py", "bisect.py", "this.py")]


@pytest.mark.parametrize("text", TRICKY + _stdlib_samples())
def test_tokenizer_round_trips(text: str) -> None:
    for tok in (
        PreTrainedTokenizerFast(tokenizer_file=str(BUILTIN_DIR / "tokenizer.json")),
        AutoTokenizer.from_pretrained(str(BUILTIN_DIR)),
    ):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids, clean_up_tokenization_spaces=False) == text


def test_indentation_is_cheap() -> None:
    tok = PreTrainedTokenizerFast(tokenizer_file=str(BUILTIN_DIR / "tokenizer.json"))
    ids = tok("        return self\n", add_special_tokens=False)["input_ids"]
    assert len(ids) <= 5
    assert len(tok("\n        x", add_special_tokens=False)["input_ids"]) <= 2
