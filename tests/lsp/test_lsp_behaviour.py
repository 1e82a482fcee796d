"""What the inline-completion path does besides decoding, end to end: stale and superseded
requests never reach the model, a newer request cancels an older one, the document-size limit,
and didClose forgetting a document. Real server, real engine, builtin model."""

from __future__ import annotations

import asyncio
import time

from lsp_client import GREET as SOURCE
from lsp_client import SLOW, inline, inline_params, open_doc, start, status
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from lsp_server.completion.inline import Completer
from lsp_server.options import parse_options

URI = "file:///work/behaviour.py"


async def test_a_request_gone_stale_in_the_debounce_never_reaches_the_model(
    client: LanguageClient,
) -> None:
    await start(client, settings={"debounceMs": 300})
    open_doc(client, URI, SOURCE)
    first = asyncio.ensure_future(inline(client, URI, 2, 4, invoked=False))
    await asyncio.sleep(0.05)  # the user typed on: a second automatic request, same document
    second = asyncio.ensure_future(inline(client, URI, 2, 4, invoked=False))
    assert await first == []  # superseded while it waited
    await second
    s = await status(client)
    assert s["requests"] == 1 and s["model_calls"] == 1


async def test_a_newer_request_cancels_the_older_one_on_its_document(
    client: LanguageClient,
) -> None:
    await start(client, settings=SLOW)
    open_doc(client, URI, SOURCE)
    older = asyncio.ensure_future(inline(client, URI, 2, 4))
    await asyncio.sleep(1.0)  # the engine is well into the older request
    newer = asyncio.ensure_future(
        client.protocol.send_request_async(
            lsp.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(URI, 2, 4), msg_id="newer"
        )
    )
    t0 = time.monotonic()
    assert await asyncio.wait_for(older, 20) == []  # stopped at its next pass
    assert time.monotonic() - t0 < 10
    assert not newer.done()  # the newer one holds the model now
    assert (await status(client))["cancelled"] >= 1
    client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="newer"))
    try:
        await asyncio.wait_for(newer, 20)
    except JsonRpcException as e:
        assert e.code == -32800


async def test_a_document_over_max_document_chars_gets_nothing(client: LanguageClient) -> None:
    await start(client, settings={"context": {"maxDocumentChars": len(SOURCE) - 1}})
    open_doc(client, URI, SOURCE)
    assert await inline(client, URI, 2, 4) == []
    s = await status(client)
    assert s["model_calls"] == 0
    # the limit is the only reason: a document within it is completed
    open_doc(client, "file:///work/small.py", SOURCE[:-2])
    await inline(client, "file:///work/small.py", 2, 4)
    assert (await status(client))["model_calls"] == 1


async def test_did_close_forgets_the_document(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, SOURCE)
    assert await inline(client, URI, 2, 4)
    assert [d["uri"] for d in (await status(client))["documents"]] == [URI]
    client.text_document_did_close(
        lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=URI))
    )
    calls = (await status(client))["model_calls"]
    assert await inline(client, URI, 2, 4) == []  # not open: nothing, not the cached items
    s = await status(client)
    assert s["documents"] == [] and s["model_calls"] == calls and s["typeahead_hits"] == 0


def test_span_candidates() -> None:
    """An invoked request tries the plan, twice it and half it (capped, de-duplicated, at most
    `candidates`); an automatic one only the plan. The spans are the engine's own
    (request.candidate_spans, the same in-process and in the engine service)."""
    from infill_engine.request import candidate_spans
    from lsp_server.options import decode_params

    def spans(invoked: bool, **settings: object) -> list[int]:
        opts, errors = parse_options(settings)
        assert errors == []
        p = decode_params(opts.decode)
        assert isinstance(p.span, int)
        return candidate_spans(p.span, p.max_span, Completer.candidates(invoked, opts))

    assert spans(True, decode={"span": 8}) == [8, 16, 4]
    assert spans(False, decode={"span": 8}) == [8]
    assert spans(True, decode={"span": 8}, candidates=2) == [8, 16]
    assert spans(True, decode={"span": 8}, candidates=1) == [8]
    assert spans(True, decode={"span": 100, "maxSpan": 128}) == [100, 128, 50]
    assert spans(True, decode={"span": 1}) == [1, 2]
    assert spans(True, decode={"span": 100, "maxSpan": 64}) == [64, 32]  # a fixed span is capped
