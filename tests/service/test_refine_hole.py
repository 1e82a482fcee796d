"""The refine call with a hole's budgets (service/refine.py): `prefixTokens`, `suffixTokens` and
`languageId` make the service cut the selection's context as `prepare` cuts a v2/infill hole's;
without them, the context goes in as sent. Bad values are one-line `bad_request`s."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from infill_engine import Engine, load
from infill_engine.hole import Hole, prepare
from infill_engine.service.refine import RefineAsk, context, parse_refine
from infill_engine.service.wire import BadRequest

LINES = "".join(f"x{i} = {i}\n" for i in range(100))
PREFIX = LINES + "def add(a, b):\n    return "
SUFFIX = "\n" + LINES


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


def ask(**more: object) -> dict[str, object]:
    return {"prefix": PREFIX, "text": "a +  b", "suffix": SUFFIX, "fraction": 0.5, **more}


def test_budgets_make_a_hole_and_none_keep_the_old_call() -> None:
    plain = parse_refine(ask())
    assert not plain.cut and plain.hole.language_id == "plaintext"
    assert plain.hole.text[plain.hole.offset : plain.hole.after] == "a +  b"
    r = parse_refine(ask(prefixTokens=24, languageId="python"))
    assert r.cut and r.hole.language_id == "python"
    assert (r.hole.prefix_tokens, r.hole.suffix_tokens) == (24, 512)  # the other's default
    for bad, message in (
        ({"prefixTokens": -1}, "prefixTokens must be an int"),
        ({"suffixTokens": "8"}, "suffixTokens must be an int"),
        ({"prefixTokens": True}, "prefixTokens must be an int"),
        ({"prefixTokens": 8, "languageId": ""}, "languageId must be a string"),
    ):
        with pytest.raises(BadRequest, match=message):
            parse_refine(ask(**bad))


def test_a_hole_is_cut_as_prepare_cuts_it(engine: Engine) -> None:
    r = parse_refine(ask(prefixTokens=24, suffixTokens=8, languageId="python"))
    prefix, suffix = context(engine, r)
    # the same hole a language server sends, its span the selection's own tokens
    n = len(engine.encode("a +  b"))
    p = r.hole.params
    params = dataclasses.replace(p, span=n, max_span=max(n, p.max_span))
    hole = Hole(PREFIX + "a +  b" + SUFFIX, len(PREFIX), len(PREFIX) + 6, "python", "command",
                prefix_tokens=24, suffix_tokens=8, params=params, drafting=False)  # fmt: skip
    ctx = prepare(engine, hole).context
    assert (prefix, suffix) == (ctx.prefix, ctx.suffix)
    assert PREFIX.endswith(prefix) and len(prefix) < 200 and SUFFIX.startswith(suffix)
    as_sent = RefineAsk(r.hole, 0.5, cut=False)
    assert context(engine, as_sent) == (PREFIX, SUFFIX)
