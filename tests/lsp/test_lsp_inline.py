"""textDocument/inlineCompletion end to end: real server, real engine, builtin model."""

from __future__ import annotations

import ast
import asyncio
import time

import pytest
from lsp_client import (
    GREET as SOURCE,
)
from lsp_client import (
    SLOW,
    change_doc,
    init_params,
    inline,
    inline_params,
    item_text,
    open_doc,
    start,
    status,
)
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

URI = "file:///work/example.py"


def apply(text: str, line: int, character: int, insert: str) -> str:
    lines = text.split("\n")
    lines[line] = lines[line][:character] + insert + lines[line][character:]
    return "\n".join(lines)


async def test_completion_parses_with_the_document(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, SOURCE)
    items = await inline(client, URI, 2, 4)
    assert 1 <= len(items) <= 3
    texts = [item_text(i) for i in items]
    assert len(set(texts)) == len(texts)  # de-duplicated
    for item in items:
        assert item.range is not None and item.range.start == item.range.end
        assert item.range.start == lsp.Position(line=2, character=4)  # on the cursor line
        text = item_text(item)
        assert text.strip(), "a completion that only adds whitespace is never returned"
        ast.parse(apply(SOURCE, 2, 4, text))
    s = await status(client)
    assert s["model_calls"] == 1  # the candidates were decoded as one batch


async def test_mid_line_items_replace_the_rest_of_the_line(client: LanguageClient) -> None:
    """Mid-line, an item covers the cursor to the line's end and carries that text after the
    fill: the same document as an insertion, in the shape editors render without hiding the
    text right of the cursor."""
    await start(client)
    rest = "  # the greeting"
    text = apply(SOURCE, 2, 4, rest)
    open_doc(client, URI, text)
    items = await inline(client, URI, 2, 4)
    assert items
    for item in items:
        assert item.range == lsp.Range(
            lsp.Position(line=2, character=4), lsp.Position(line=2, character=4 + len(rest))
        )
        new = item_text(item)
        assert new.endswith(rest) and new[: -len(rest)].strip()
        ast.parse(apply(SOURCE, 2, 4, new))  # the rest of the line was replaced by itself


async def test_a_request_while_the_model_loads_is_answered_once_it_is_ready(
    client: LanguageClient,
) -> None:
    await client.initialize_session(init_params())
    open_doc(client, URI, SOURCE)
    assert (await status(client))["state"] in ("idle", "loading")
    items = await inline(client, URI, 2, 4)  # held, not dropped
    assert items and (await status(client))["state"] == "ready"


async def test_automatic_trigger_returns_one_item(client: LanguageClient) -> None:
    await start(client, settings={"debounceMs": 20})
    open_doc(client, URI, SOURCE)
    items = await inline(client, URI, 2, 4, invoked=False)
    assert len(items) == 1


async def test_typed_ahead_cache_answers_without_a_model_call(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, SOURCE)
    first = item_text((await inline(client, URI, 2, 4))[0])
    calls = (await status(client))["model_calls"]
    typed = first[:1] if len(first) > 1 else None
    assert typed is not None and "\n" not in typed
    change_doc(client, URI, 2, apply(SOURCE, 2, 4, typed))
    again = await inline(client, URI, 2, 4 + len(typed))
    s = await status(client)
    assert s["model_calls"] == calls and s["typeahead_hits"] == 1
    assert item_text(again[0]) == first[len(typed) :]


async def test_bad_positions_and_unknown_uris_are_empty(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, SOURCE)
    assert await inline(client, "file:///never/opened.py", 0, 0) == []
    assert await inline(client, URI, 999, 0) == []
    assert (await status(client))["model_calls"] == 0
    # A character past the end of the line clamps to its end (LSP rule) and still works.
    items = await inline(client, URI, 2, 400)
    assert items and all(i.range is not None and i.range.start.character == 4 for i in items)


async def test_disabled_language_is_empty(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, "file:///notes.md", "# Title\n\nSome text\n", language="markdown")
    assert await inline(client, "file:///notes.md", 2, 4) == []
    assert (await status(client))["model_calls"] == 0


async def test_cancel_stops_the_engine(client: LanguageClient) -> None:
    await start(client, settings=SLOW)
    open_doc(client, URI, SOURCE)
    reply = asyncio.ensure_future(  # a coroutine: sent only once it is scheduled
        client.protocol.send_request_async(
            lsp.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(URI, 2, 4), msg_id="slow-1"
        )
    )
    await asyncio.sleep(1.0)  # the engine is now well into the span
    client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="slow-1"))
    with pytest.raises(JsonRpcException) as error:
        await reply
    assert error.value.code == -32800  # RequestCancelled
    t0 = time.monotonic()  # a wait for the engine's count, not a measure: 60 s of slack
    while (s := await status(client))["cancelled"] == 0 and time.monotonic() - t0 < 60:
        await asyncio.sleep(0.02)
    assert s["cancelled"] == 1 and s["last"]["stop_reason"] == "cancelled"
    # it stopped part-way, the engine's own count says: the rest of the span never ran (a
    # pass count, not a wall-clock bound, so a loaded machine cannot break it)
    assert 0 < s["last"]["nfe"] < 300


LOOP = (
    "def total(prices, rate):\n"
    "    out = 0\n"
    "    for p in prices:\n"
    "        \n"
    "    return round(out * rate, 2)\n"
    "\n"
    "\n"
    "def label(item):\n"
    "    return \n"
    "\n"
    "\n"
    "def scaled(values, k):\n"
    "    return [v * k for v in values]\n"
)


@pytest.mark.parametrize(
    ("line", "character"),
    [
        (3, 8),  # a blank line in a loop body (once "else:::::::::")
        (8, 11),  # after `return `
        (11, 25),  # the end of a def line: a body to write
        (12, 14),  # inside a list comprehension, text to the right
    ],
)
async def test_no_item_shown_adds_a_syntax_error(
    client: LanguageClient, line: int, character: int
) -> None:
    from infill_engine.finish import syntax

    await start(client)
    open_doc(client, URI, LOOP)
    items = await inline(client, URI, line, character)
    before = syntax.error_count(LOOP, "python")
    for item in items:
        assert item.range is not None
        lines = LOOP.split("\n")
        lo, hi = item.range.start, item.range.end
        assert lo.line == hi.line == line
        lines[line] = lines[line][: lo.character] + item_text(item) + lines[line][hi.character :]
        after = "\n".join(lines)
        assert syntax.error_count(after, "python") <= before, after
    s = await status(client)
    assert s["model_calls"] == 1 and s["last"]["stop_reason"] in (
        "end_token",
        "span_full",
        "syntax",
    )
