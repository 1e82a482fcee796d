"""Other files' chunks in the native call (`extra`, `extraTokens`) and llama.cpp's `input_extra`:
placed before the prefix under a comment naming their file, cut to their own budget from the
last chunk back, and never at the cost of the prefix and suffix budgets. The real builtin
engine and tokenizer, in process and over the HTTP front."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from infill_engine import Engine, load
from infill_engine.context import Tokens, build_extra, chunk_text, tokenize_with
from infill_engine.hole import Hole, prepare
from infill_engine.params import InfillParams
from infill_engine.scheduler import Scheduler
from infill_engine.service import Service, ServiceThread, parse_address
from infill_engine.service.compat import parse_llama
from infill_engine.service.native import parse_native
from infill_engine.service.wire import BadRequest

DOC = "import helpers\n\n\ndef total(items):\n    return helpers.\n\n\nprint(total([1, 2]))\n"
CURSOR = DOC.index("helpers.\n") + len("helpers.")
HELPERS = "def frobnicate(xs):\n    return sum(xs)\n\n\ndef widen(x):\n    return x * 2\n"
OTHER = "".join(f"value_{i} = {i}\n" for i in range(60))  # long: cut, or dropped


def words(s: str) -> Tokens:
    """A whitespace tokenizer: one token per word, spans in characters."""
    spans, at = [], 0
    for w in s.split():
        at = s.index(w, at)
        spans.append((at, at + len(w)))
        at += len(w)
    return Tokens(list(range(len(spans))), spans)


def test_chunks_keep_from_the_last_back_and_the_next_is_cut_to_its_last_lines() -> None:
    a = "".join(f"a{i} = {i}\n" for i in range(10))  # 30 words, 31 with its header's two
    b = "b = 1\n"  # 3 words, 5 with "# b.py"
    whole = build_extra([("a.py", a), ("b.py", b)], "#", words, 100)
    assert whole.text == "# a.py\n" + a + "# b.py\n" + b and whole.files == ("a.py", "b.py")
    assert len(whole.ids) == 32 + 5
    cut = build_extra([("a.py", a), ("b.py", b)], "#", words, 5 + 2 + 18)
    assert cut.files == ("a.py", "b.py")
    assert cut.text == "# a.py\n" + "".join(f"a{i} = {i}\n" for i in range(4, 10)) + "# b.py\n" + b
    assert len(cut.ids) <= 25
    # too little room for a cut worth keeping: only the last chunk stays
    assert build_extra([("a.py", a), ("b.py", b)], "#", words, 5 + 2 + 10).files == ("b.py",)
    assert build_extra([("a.py", a)], "#", words, 0).text == ""
    assert chunk_text("", "x = 1", "//") == "x = 1\n"
    assert chunk_text("m.ts", "x = 1\n", "//") == "// m.ts\nx = 1\n"


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


def ask(extra: tuple[tuple[str, str], ...] = (), extra_tokens: int = 512) -> Hole:
    params = InfillParams(span=8, max_span=8, min_tokens=1)
    return Hole(DOC, CURSOR, None, "python", "invoked", 1, 10, 12, params, extra=extra,
                extra_tokens=extra_tokens)  # fmt: skip


def test_chunks_go_before_the_prefix_under_their_headers_within_their_own_budget(
    engine: Engine,
) -> None:
    plain = prepare(engine, ask())
    both = prepare(engine, ask((("lib/other.py", OTHER), ("helpers.py", HELPERS))))
    ctx = both.context
    assert ctx.extra is not None
    # the prefix and suffix are exactly what they are without chunks: their budgets hold
    assert (ctx.prefix, ctx.suffix) == (plain.context.prefix, plain.context.suffix)
    assert (ctx.prefix_ids, ctx.suffix_ids) == (plain.context.prefix_ids, plain.context.suffix_ids)
    assert len(ctx.prefix_ids) <= 10 and plain.context.prefix_start > 0  # the budget did cut
    # the most relevant (last) chunk whole, right before the prefix, under its file's name
    assert ctx.extra.text.endswith("# helpers.py\n" + HELPERS)
    assert ctx.model_prefix == ctx.extra.text + ctx.prefix
    row = both.requests[0]
    assert row.prefix_ids == ctx.extra.ids + ctx.prefix_ids
    assert engine.decode_ids(row.prefix_ids[: len(ctx.extra.ids)]) == ctx.extra.text
    tokenizer = engine.tokenizer
    assert len(ctx.extra.ids) <= 512
    # a budget of its own: the long chunk is cut (or dropped) to fit it, nothing else moves
    small = prepare(engine, ask((("lib/other.py", OTHER), ("helpers.py", HELPERS)), 48))
    assert small.context.extra is not None and 0 < len(small.context.extra.ids) <= 48
    assert small.context.extra.text.endswith("# helpers.py\n" + HELPERS)
    assert "value_0 =" not in small.context.extra.text
    assert small.context.prefix_ids == plain.context.prefix_ids
    assert len(tokenize_with(tokenizer, small.context.extra.text).ids) <= 48 + 2
    # and off: a zero budget places nothing
    off = prepare(engine, ask((("helpers.py", HELPERS),), 0))
    assert off.context.extra is None and off.requests[0].prefix_ids == plain.context.prefix_ids


def test_chunks_never_push_the_row_past_the_models_positions(engine: Engine) -> None:
    big = tuple((f"m{i}.py", OTHER) for i in range(8))
    p = prepare(engine, ask(big, 32768))
    row = p.requests[0]
    reach = max(row.span, row.max_span)  # its growth room too: nothing of it is trimmed
    assert len(row.prefix_ids) + reach + len(row.suffix_ids) <= engine.args.max_positions
    assert p.context.extra is not None and len(p.context.extra.ids) > 64  # the room was used


def test_the_fields_are_checked() -> None:
    base: dict[str, Any] = {"text": "x = ", "offset": 4}
    parsed = parse_native({**base, "extra": [{"path": "a.py", "text": "A = 1"}, {"text": ""}],
                           "extraTokens": 64})  # fmt: skip
    assert parsed.extra == (("a.py", "A = 1"),) and parsed.extra_tokens == 64
    assert parse_native(base).extra == () and parse_native(base).extra_tokens == 512
    for bad in ({"extra": "x"}, {"extra": [1]}, {"extra": [{"text": 1}]},
                {"extra": [{"path": 2, "text": "x"}]}, {"extraTokens": -1},
                {"extra": [{"text": "x"}] * 65}):  # fmt: skip
        with pytest.raises(BadRequest):
            parse_native({**base, **bad})


def test_input_extra_takes_the_same_budgeted_path(engine: Engine) -> None:
    chunk = {"filename": "helpers.py", "text": HELPERS}
    body = {"input_prefix": "import helpers\nhelpers.", "input_suffix": "\n",
            "input_extra": [chunk], "extra_tokens": 40}  # fmt: skip
    c = parse_llama(body)
    assert c.ask.text == "import helpers\nhelpers.\n" and c.ask.offset == len(body["input_prefix"])
    assert c.ask.extra == (("helpers.py", HELPERS),) and c.ask.extra_tokens == 40
    ctx = prepare(engine, c.ask).context
    assert ctx.extra is not None and ctx.extra.files == ("helpers.py",)
    assert ctx.prefix == body["input_prefix"] and len(ctx.extra.ids) <= 40


def test_the_native_reply_names_the_chunks_the_model_saw(engine: Engine) -> None:
    service = Service(
        engine, "builtin", "crossfile-token", scheduler=Scheduler(engine.live_batch, max_batch=4)
    )
    auth = {"Authorization": "Bearer crossfile-token"}
    with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
        assert http.bound is not None
        with httpx.Client(base_url=f"http://127.0.0.1:{http.bound.port}", timeout=60) as client:
            body = {"text": DOC, "offset": CURSOR, "languageId": "python", "prefixTokens": 24,
                    "suffixTokens": 12, "params": {"span": 4, "max_span": 4},
                    "extra": [{"path": "helpers.py", "text": HELPERS}]}  # fmt: skip
            reply = client.post("/v2/infill", headers=auth, json=body).json()
            assert reply["context"]["extra"] == ["helpers.py"]
            assert 0 < reply["context"]["extra_tokens"] <= 512
            none = client.post("/v2/infill", headers=auth, json={**body, "extra": []}).json()
            assert "extra" not in none["context"] and "extra_tokens" not in none["context"]
            assert none["context"]["start"] == reply["context"]["start"]
