"""No repetition loop as ghost text: a blank line inside `with open(path) as f:` is where the
builtin model writes `path.path.path.` until its span runs out; the real server over stdio shows
nothing of it (the finishing steps cut the loop), whatever else it offers there.

An empty answer is one the claim allows (the loop cut away, nothing left), so the test checks
what makes the claim mean something: that the model does write the loop there (in-process, the
same builtin model), and that each of the server's answers came after a model call that wrote
tokens, not from a request that never reached the model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from lsp_client import inline, item_text, open_doc, start, status
from pytest_lsp import LanguageClient

from infill_engine import Engine, InfillParams, load
from infill_engine.repeat import find_loop

URI = "file:///work/read.py"
SOURCES = [
    "with open(path) as f:\n    \n",
    "import os\n\n\ndef load(path):\n    with open(path) as f:\n        \n",
]


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


@pytest.mark.parametrize("source", SOURCES)
def test_the_builtin_model_writes_a_loop_there(engine: Engine, source: str) -> None:
    """The premise: without the finishing steps the fill at the blank line is a loop of
    `path.`; were it not, the server test below would prove nothing."""
    cursor = len(source) - 1  # the blank line's end
    raw = engine.infill(source[:cursor], source[cursor:], InfillParams(span=64)).text
    loop = find_loop(raw)
    assert loop is not None and loop.unit == "path.", raw


async def test_a_repetition_loop_is_never_shown(client: LanguageClient) -> None:
    await start(client)
    for n, source in enumerate(SOURCES):
        uri = URI.replace(".py", f"{n}.py")
        open_doc(client, uri, source)
        line = source.count("\n") - 1  # the blank line in the `with` block
        column = len(source.split("\n")[line])
        # automatic first: an invoked request's items would be kept for typing ahead, and the
        # automatic one would be answered from them without a model call
        for invoked in (False, True):
            calls = (await status(client))["model_calls"]
            items = await inline(client, uri, line, column, invoked=invoked)
            after = await status(client)
            assert after["model_calls"] == calls + 1, (n, invoked)  # the model was asked
            assert after["last"]["tokens"] > 0, after["last"]  # and wrote something
            for item in items:
                text = item_text(item)
                assert find_loop(text) is None, text
                assert text.count("path") < 4, text
