"""Next edits end to end: the real server over stdio (the builtin model loaded, though no model
is asked), `textDocument/copilotInlineEdit` as copilot-lsp.nvim and sidekick.nvim send it.

After a rename of a parameter the request answers the next reference's edit: its range in
UTF-16 on a line with characters outside the BMP, the document's version, and the command whose
execution counts one acceptance of kind "rename" in dllm/status. A stale version, an unknown
document, the feature turned off, or an edit that implies nothing get `{edits: []}`; params of
another shape get InvalidParams, and the server carries on. A client that sends the whole text
on each change gets the same edit as one that sends the change alone, in UTF-8 when it
negotiated UTF-8.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsp_client import StdioPeer, init_params, open_doc, plain, start, status
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient

from lsp_server.options import NextEditOptions, parse_options

URI = "file:///work/area.py"
# line 2's `w` is at code point 17, UTF-16 unit 18 (the emoji takes two units)
TEXT = 's = "né"\ndef area(w, h):\n    return "é🙂", w * h\n'
METHOD = "textDocument/copilotInlineEdit"


def rename_w(client: LanguageClient, version: int = 2) -> None:
    """The parameter `w` (line 1, characters 9-10) becomes `width`, one incremental change."""
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=URI, version=version),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(1, 9), lsp.Position(1, 10)), text="width"
                )
            ],
        )
    )


def params(version: int | None = 2, line: int = 1, character: int = 14) -> dict[str, Any]:
    doc: dict[str, Any] = {"uri": URI} if version is None else {"uri": URI, "version": version}
    return {
        "textDocument": doc,
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 2},  # sidekick.nvim's; ignored
    }


async def ask(client: LanguageClient, p: Any) -> list[dict[str, Any]]:
    result = plain(await client.protocol.send_request_async(METHOD, p))
    assert isinstance(result, dict) and isinstance(result["edits"], list), result
    return list(result["edits"])


async def test_a_rename_suggests_the_next_reference_and_counts_its_acceptance(
    client: LanguageClient,
) -> None:
    await start(client)
    open_doc(client, URI, TEXT)
    rename_w(client)
    edits = await ask(client, params())
    assert len(edits) == 1
    edit = edits[0]
    assert edit["range"] == {
        "start": {"line": 2, "character": 18},
        "end": {"line": 2, "character": 19},
    }
    assert edit["text"] == "width"
    assert edit["textDocument"] == {"uri": URI, "version": 2}
    command = edit["command"]
    assert command["command"] == "dllm.nextEditAccepted"
    assert len(command["arguments"]) == 1 and isinstance(command["arguments"][0], str)
    counts = (await status(client))["next_edits"]
    assert counts["asked"] == 1
    assert counts["kinds"]["rename"] == {"suggested": 1, "shown": 0, "accepted": 0}
    # copilot-lsp.nvim's report of the edit shown, then the user takes it
    client.protocol.notify("textDocument/didShowInlineEdit", {"item": {"command": command}})
    counts = (await status(client))["next_edits"]
    assert counts["kinds"]["rename"] == {"suggested": 1, "shown": 1, "accepted": 0}
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=command["command"], arguments=command["arguments"])
    )
    counts = (await status(client))["next_edits"]
    assert counts["kinds"]["rename"] == {"suggested": 1, "shown": 1, "accepted": 1}
    # the same command again counts nothing more
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=command["command"], arguments=command["arguments"])
    )
    assert (await status(client))["next_edits"]["kinds"]["rename"]["accepted"] == 1
    # then what gets no edit
    assert await ask(client, params(version=1)) == []  # the client's text is older
    assert await ask(client, params(version=3)) == []
    assert (
        await ask(client, {**params(), "textDocument": {"uri": "file:///nope.py", "version": 2}})
        == []
    )
    assert await ask(client, params(line=99)) == []  # past the document
    for bad in (
        None,
        [],
        "x",
        {"textDocument": {"uri": URI}},
        params() | {"position": {"line": -1, "character": 0}},
        {"textDocument": {"uri": 5}, "position": {"line": 0, "character": 0}},
        params() | {"textDocument": {"uri": URI, "version": "2"}},
    ):
        with pytest.raises(JsonRpcException) as caught:
            await client.protocol.send_request_async(METHOD, bad)
        assert caught.value.code == -32602, bad
    # Copilot's didFocus, of a document open, unknown, or malformed: no answer, no harm
    for focus in ({"textDocument": {"uri": URI}}, {"textDocument": {"uri": "file:///x"}}, [], None):
        client.protocol.notify("textDocument/didFocus", focus)
    # still alive, and still answering
    assert len(await ask(client, params())) == 1
    assert (await status(client))["state"] == "ready"


async def test_a_client_that_sends_the_whole_text_gets_the_same_edit_in_its_encoding(
    client: LanguageClient,
) -> None:
    """A client that negotiated UTF-8 gets the range in bytes: the `w` after `"é🙂", ` is at
    byte 21 of its line (é two bytes, the emoji four)."""
    result = await start(client, settings={"stats": {"enabled": False}}, encodings=["utf-8"])
    assert result.capabilities.position_encoding == lsp.PositionEncodingKind.Utf8
    open_doc(client, URI, TEXT)
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=URI, version=2),
            content_changes=[
                lsp.TextDocumentContentChangeWholeDocument(text=TEXT.replace("(w,", "(width,"))
            ],
        )
    )
    edits = await ask(client, params())
    assert [(e["range"], e["text"]) for e in edits] == [
        ({"start": {"line": 2, "character": 21}, "end": {"line": 2, "character": 22}}, "width")
    ]
    assert "command" not in edits[0]  # counting is off: nothing to report back


async def test_turned_off_there_are_none(client: LanguageClient) -> None:
    await start(client, settings={"nextEdits": {"enabled": False}})
    open_doc(client, URI, TEXT)
    rename_w(client)
    assert await ask(client, params()) == []
    assert (await status(client))["next_edits"]["asked"] == 0
    client.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"nextEdits": {"enabled": True}})
    )
    assert len(await ask(client, params())) == 1
    # an edit that implies nothing elsewhere: a new line appended to another document
    other = "file:///work/other.py"
    open_doc(client, other, TEXT)
    end = TEXT.count("\n")
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=other, version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(end, 0), lsp.Position(end, 0)), text="x = 1\n"
                )
            ],
        )
    )
    edit = {
        "textDocument": {"uri": other, "version": 2},
        "position": {"line": end + 1, "character": 0},
    }
    assert await ask(client, edit) == []
    counts = (await status(client))["next_edits"]
    assert counts["asked"] == 2 and counts["kinds"]["rename"]["suggested"] == 1


def test_the_settings_and_the_copilot_clients_own() -> None:
    opts, errors = parse_options(
        {
            "nextEdits": {
                "enabled": False,
                "gate": 0.25,
                "model": True,
                "hostedAddress": "mercury+https://api.inceptionlabs.ai/v1/",
                "maxLatencyMs": 120,
            }
        }
    )
    assert errors == []
    assert opts.next_edits == NextEditOptions(
        False, 0.25, True, "mercury+https://api.inceptionlabs.ai/v1", 120
    )
    bad = {"gate": 2, "hostedAddress": "https://x/v1", "maxLatencyMs": 0, "model": "yes"}
    opts, errors = parse_options({"nextEdits": bad})
    assert opts.next_edits == NextEditOptions() and len(errors) == 4
    assert all(e.startswith("setting 'nextEdits.") for e in errors), errors
    # what copilot-lsp.nvim's config sends a Copilot server: the client's own, no message
    copilot = {
        "editorInfo": {"name": "neovim", "version": "0.11.0"},
        "editorPluginInfo": {"name": "Github Copilot LSP for Neovim", "version": "0.0.1"},
        "nextEditSuggestions": {"enabled": True},
    }
    assert parse_options(copilot) == (parse_options(None)[0], [])


# -- any params at all, over the raw wire ----------------------------------------------------------
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(), st.text(max_size=8)
)
anything = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
coordinate = st.one_of(st.integers(-2, 40), st.sampled_from([2**31 - 1, 2**31, 10**30]), anything)
shaped = st.fixed_dictionaries(
    {
        "textDocument": st.fixed_dictionaries(
            {"uri": st.one_of(st.just(URI), st.just(""), anything)},
            optional={"version": st.one_of(st.integers(0, 4), anything)},
        ),
        "position": st.one_of(
            st.fixed_dictionaries({"line": coordinate, "character": coordinate}), anything
        ),
    },
    optional={"context": anything, "extra": anything},
)


class WirePeer(StdioPeer):
    def call(self, method: str, params: Any) -> dict[str, Any]:
        return self.reply(self.ask(method, params), timeout=10.0)


@pytest.fixture(scope="module")
def peer() -> Iterator[WirePeer]:
    p = WirePeer()
    try:
        init = default_converter().unstructure(init_params())
        assert "result" in p.reply(p.ask("initialize", init), timeout=120.0)
        p.notify("initialized", {})
        p.open(URI, TEXT)
        change = {
            "range": {"start": {"line": 1, "character": 9}, "end": {"line": 1, "character": 10}},
            "text": "width",
        }
        p.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [change]},
        )
        yield p
    finally:
        if p.proc.poll() is None:
            p.send({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"})
            p.notify("exit", None)
            p.proc.wait(timeout=30)


@settings(
    deadline=None, database=None, max_examples=120, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.one_of(shaped, anything), anything)
def test_any_params_get_edits_or_invalid_params(peer: WirePeer, params: Any, report: Any) -> None:
    reply = peer.call(METHOD, params)
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        assert reply["error"]["code"] == -32602 and len(reply["error"]["message"]) < 200, reply
    else:
        edits = reply["result"]["edits"]
        assert len(edits) <= 1
        for edit in edits:  # only ever the open document, at its version
            assert edit["textDocument"] == {"uri": URI, "version": 2} and edit["text"] == "width"
    peer.notify("textDocument/didShowInlineEdit", report)
    peer.notify("textDocument/didFocus", report)
    reply = peer.call(
        "workspace/executeCommand", {"command": "dllm.nextEditAccepted", "arguments": [report]}
    )
    assert "result" in reply, reply
    assert peer.errors == [], "a popup of type Error: a failure of ours"


def test_after_the_fuzz_the_server_still_answers(peer: WirePeer) -> None:
    reply = peer.call(METHOD, params())
    assert [e["range"]["start"] for e in reply["result"]["edits"]] == [{"line": 2, "character": 18}]
    assert peer.proc.poll() is None and peer.errors == []
