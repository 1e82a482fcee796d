"""The next-edit sources beside structure, through the real server over stdio: the hosted
next-edit API (`nextEdits.hostedAddress`, against the loopback Mercury Edit stand-in) answers
an edit that structure alone does not suggest, and the dLLM's rewrite tier runs only where it
may (not for the untrusted builtin model unless `nextEdits.model` says so)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest
from edit_standin import KEY, Standin
from fim_standin import running
from lsp_client import open_doc, plain, start, status
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from infill_engine.edits import Edit
from lsp_server.completion.edit_sources import ModelSource
from lsp_server.completion.next_edit import EditAsk
from lsp_server.engines.backend import Backend
from lsp_server.options import parse_options

URI = "file:///work/total.py"
TEXT = "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n"
KEY_ENV = "DLLM_TEST_NEXT_EDIT_KEY"
os.environ[KEY_ENV] = KEY  # the server, started by the fixture, inherits it


def add_line(region: str) -> str:
    """The stand-in's rewrite: the loop's body also counts."""
    return region.replace("        s += x\n", "        s += x\n        n += 1\n")


@pytest.fixture
def standin() -> Iterator[Standin]:
    with running(Standin(add_line)) as s:
        yield s


async def test_the_hosted_api_s_edit_is_shown_with_its_kind(
    client: LanguageClient, standin: Standin
) -> None:
    settings = {
        "engineApiKeyEnv": KEY_ENV,
        "nextEdits": {"hostedAddress": standin.address, "maxLatencyMs": 5000},
    }
    await start(client, settings=settings)
    open_doc(client, URI, TEXT)
    client.text_document_did_change(  # `s = 0` -> `s, n = 0, 0`: no structural rule applies
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=URI, version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(1, 4), lsp.Position(1, 9)), text="s, n = 0, 0"
                )
            ],
        )
    )
    p = {"textDocument": {"uri": URI, "version": 2}, "position": {"line": 1, "character": 15}}
    result = plain(await client.protocol.send_request_async("textDocument/copilotInlineEdit", p))
    (edit,) = result["edits"]
    assert edit["text"].strip() == "n += 1"
    assert edit["range"]["start"]["line"] in (3, 4)
    (seen,) = standin.seen
    assert seen.auth == f"Bearer {KEY}" and seen.problems == []
    assert "-    s = 0" in seen.content and "+    s, n = 0, 0" in seen.content  # the history
    kinds = (await status(client))["next_edits"]["kinds"]
    assert kinds["hosted"]["suggested"] == 1


@pytest.mark.parametrize(
    "added",
    [
        "        n += (\n",  # tree-sitter's error
        "        nonlocal n\n",  # parses, but compile() finds no binding for it
    ],
)
async def test_a_hosted_edit_that_breaks_the_document_is_not_shown(
    client: LanguageClient, added: str
) -> None:
    def breaking(region: str) -> str:
        return region.replace("        s += x\n", "        s += x\n" + added)

    with running(Standin(breaking)) as standin:
        settings = {
            "engineApiKeyEnv": KEY_ENV,
            "nextEdits": {"hostedAddress": standin.address, "maxLatencyMs": 5000},
        }
        await start(client, settings=settings)
        open_doc(client, URI, TEXT)
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=URI, version=2),
                content_changes=[
                    lsp.TextDocumentContentChangePartial(
                        range=lsp.Range(lsp.Position(1, 4), lsp.Position(1, 9)),
                        text="s, n = 0, 0",
                    )
                ],
            )
        )
        p = {"textDocument": {"uri": URI, "version": 2}, "position": {"line": 1, "character": 15}}
        method = "textDocument/copilotInlineEdit"
        result = plain(await client.protocol.send_request_async(method, p))
        assert len(standin.seen) == 1  # asked, answered, and the answer refused
    assert result["edits"] == []
    assert (await status(client))["next_edits"]["kinds"].get("hosted", {}).get("suggested", 0) == 0


def ask(language: str = "python") -> EditAsk:
    return EditAsk(URI, TEXT, 10, language, [Edit(4, "x", "xs", "def total(", "):")], None)


@pytest.mark.parametrize(
    ("settings", "wanted"),
    [
        ({}, False),  # the builtin model is not trusted: no rewrite unasked
        ({"nextEdits": {"model": True}}, True),
        ({"drafts": {"trustModel": True}}, True),
        ({"drafts": {"trustModel": True}, "nextEdits": {"model": False}}, False),
        ({"model": "/models/any"}, True),  # a model of the user's own is trusted
    ],
)
def test_the_model_tier_runs_where_it_may(settings: dict[str, object], wanted: bool) -> None:
    opts, errors = parse_options(settings)
    assert errors == []
    assert ModelSource.wanted(ask(), opts) is wanted


def test_the_model_tier_stays_out_of_a_language_the_model_does_not_know() -> None:
    opts, errors = parse_options({"nextEdits": {"model": True}})
    assert errors == []
    assert ModelSource.wanted(ask("python"), opts)
    assert not ModelSource.wanted(ask("go"), opts)  # the builtin model's card says Python


def test_the_model_tier_asks_the_engine_in_process_once(dream_engine: Any) -> None:
    """Wanted (`nextEdits.model`), the source runs one rewrite on the model in process and
    answers its suggestion, or nothing where the model wrote the region back unchanged."""
    backend = Backend(lambda _: None, engine=dream_engine)
    opts, _ = parse_options({"nextEdits": {"model": True}})
    source = ModelSource(backend)
    found = asyncio.run(source(ask(), opts))
    assert backend.counters.model_calls == 1 and backend.counters.last["kind"] == "rewrite"
    assert all(s.kind == "model" and s.applies_to(TEXT) for s in found)
    off, _ = parse_options({"nextEdits": {"model": False}})
    assert asyncio.run(source(ask(), off)) == [] and backend.counters.model_calls == 1
