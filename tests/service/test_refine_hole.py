"""The refine call with a hole's budgets (service/refine.py): `prefixTokens`, `suffixTokens` and
`languageId` make the service cut the selection's context as `prepare` cuts a v2/infill hole's;
without them, the context goes in as sent. Bad values are one-line `bad_request`s."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from infill_engine import Engine, load
from infill_engine.service.native import NativeAsk, prepare
from infill_engine.service.refine import RefineAsk, cut, parse_refine
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
    assert plain.budgets is None and plain.language_id == "plaintext"
    hole = parse_refine(ask(prefixTokens=24, languageId="python"))
    assert hole.budgets == (24, 512) and hole.language_id == "python"  # the other's default
    for bad, message in (
        ({"prefixTokens": -1}, "prefixTokens must be an int"),
        ({"suffixTokens": "8"}, "suffixTokens must be an int"),
        ({"prefixTokens": True}, "prefixTokens must be an int"),
        ({"prefixTokens": 8, "languageId": ""}, "languageId must be a string"),
    ):
        with pytest.raises(BadRequest, match=message):
            parse_refine(ask(**bad))


def test_a_hole_is_cut_as_prepare_cuts_it(engine: Engine) -> None:
    cancel = threading.Event()
    r = parse_refine(ask(prefixTokens=24, suffixTokens=8, languageId="python"))
    prefix, suffix = cut(engine, r, cancel)
    hole = NativeAsk(PREFIX + "a +  b" + SUFFIX, len(PREFIX), len(PREFIX) + 6, "python",
                     "command", 1, 24, 8, r.params, None, drafting=False)  # fmt: skip
    ctx = prepare(engine, hole, cancel).context
    assert (prefix, suffix) == (ctx.prefix, ctx.suffix)
    assert PREFIX.endswith(prefix) and len(prefix) < 200 and SUFFIX.startswith(suffix)
    as_sent = RefineAsk(PREFIX, "a +  b", SUFFIX, 0.5, r.params)
    assert cut(engine, as_sent, cancel) == (PREFIX, SUFFIX)
