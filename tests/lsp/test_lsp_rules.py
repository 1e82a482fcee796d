"""The completion rules end to end over stdio: nothing automatic in a comment or a string, a
snooze (`dllm.snooze`) that both editors share, the language list, and the editor's formatting
options honoured. The engine's request count (dllm/status) shows what never reached it."""

from __future__ import annotations

from typing import Any

import pytest
from lsp_client import GREET, StdioPeer, init_params, inline, open_doc, start, status
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient

URI = "file:///work/greet.py"
COMMENTED = GREET.replace('    """Return a greeting for name."""\n', "    # say hello to \n")


async def snooze(client: LanguageClient, *args: Any) -> Any:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="dllm.snooze", arguments=list(args))
    )


async def test_no_automatic_completion_in_a_comment(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, COMMENTED)
    before = (await status(client))["requests"]
    assert await inline(client, URI, 1, len("    # say hello to "), invoked=False) == []
    assert (await status(client))["requests"] == before  # never reached the engine
    await inline(client, URI, 1, len("    # say hello to "), invoked=True)
    assert (await status(client))["requests"] == before + 1  # asked for: it runs


async def test_snooze_stops_automatic_suggestions_until_woken(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, GREET)
    assert (await snooze(client, 5))["snoozed_s"] > 290
    assert (await status(client))["snoozed_s"] > 290
    before = (await status(client))["requests"]
    assert await inline(client, URI, 2, 4, invoked=False) == []
    assert (await status(client))["requests"] == before
    assert await inline(client, URI, 2, 4, invoked=True)  # an invoked one still answers
    assert any("snoozed for 5 min" in m.message for m in client.messages)
    assert (await snooze(client, 0))["snoozed_s"] == 0
    assert await inline(client, URI, 2, 4, invoked=False)
    for bad in ([-1], ["ten"], []):
        with pytest.raises(JsonRpcInvalidParams):
            await snooze(client, *bad)


async def test_a_language_outside_the_list_gets_nothing(client: LanguageClient) -> None:
    await start(client)
    js = "file:///work/a.js"
    open_doc(client, js, "function f(a) {\n  return \n}\n", "javascript")
    before = (await status(client))["requests"]
    assert await inline(client, js, 1, 9, invoked=True) == []
    assert (await status(client))["requests"] == before


def test_the_editor_formatting_options_indent_the_items() -> None:
    """formattingOptions on the request (a raw field: LSP's InlineCompletionParams has none)
    decide the items' indentation: tabs here, in a document indented with spaces."""
    peer = StdioPeer()
    try:
        init = default_converter().unstructure(init_params())
        assert "result" in peer.reply(peer.ask("initialize", init))
        peer.notify("initialized", {})
        peer.wait_loaded()
        stack = "class Stack:\n    def __init__(self):\n        \n"
        texts = {}
        for name, options in (("spaces", None), ("tabs", {"tabSize": 4, "insertSpaces": False})):
            uri = f"file:///work/stack_{name}.py"  # one document each: no typed-ahead answer
            peer.open(uri, stack)
            params: dict[str, Any] = {
                "textDocument": {"uri": uri},
                "position": {"line": 2, "character": 8},
                "context": {"triggerKind": 1},
            }
            if options:
                params["formattingOptions"] = options
            reply = peer.reply(peer.ask("textDocument/inlineCompletion", params))
            texts[name] = [item["insertText"] for item in reply["result"]["items"]]
        body = [line for t in texts["tabs"] for line in t.split("\n")[1:] if line.strip()]
        assert body, texts  # the builtin model writes a body of several lines here
        assert all(line.startswith("\t\t") and not line.startswith(" ") for line in body), texts
        assert texts["tabs"] != texts["spaces"] and "\t" not in "".join(texts["spaces"])
    finally:
        peer.kill()
