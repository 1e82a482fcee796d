"""Context from other files end to end: the real server over stdio with the builtin model. A name
defined in another open document reaches the engine's context (the engine's own count of the
chunk tokens it placed, and the file they came from); `context.crossFile: false` removes it."""

from __future__ import annotations

from lsp_client import inline, open_doc, start, status
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

HELPERS_URI = "file:///work/pkg/helpers.py"
MAIN_URI = "file:///work/pkg/main.py"
OTHER_URI = "file:///work/pkg/shapes.py"
HELPERS = (
    "def frobnicate_widgets(widgets, factor):\n"
    '    """Scale each widget by factor."""\n'
    "    return [w * factor for w in widgets]\n"
)
SHAPES = "class Polygon:\n    def perimeter(self, sides):\n        return sum(sides)\n"
MAIN = "from helpers import frobnicate_widgets\n\nscaled = frobnicate_widgets(\n"
SETTINGS = {
    "context": {"prefixTokens": 64, "suffixTokens": 32, "crossFileTokens": 128},
    "decode": {"span": 6, "maxSpan": 6, "minTokens": 1},
}


async def test_a_name_from_another_open_document_reaches_the_engine(
    client: LanguageClient,
) -> None:
    await start(client, settings=SETTINGS)
    open_doc(client, HELPERS_URI, HELPERS)
    open_doc(client, OTHER_URI, SHAPES)
    open_doc(client, MAIN_URI, MAIN)
    await inline(client, MAIN_URI, 2, len("scaled = frobnicate_widgets("))
    s = await status(client)
    assert {c["name"] for c in s["crossfile"]["chunks"]} == {"helpers.py", "shapes.py", "main.py"}
    last = s["crossfile"]["last"]
    assert last["chosen"] == ["helpers.py"]  # not its own document, not the unrelated one
    assert "frobnicate_widgets" in last["shared"]
    assert last["ms"] >= 0  # its time is reported; how long it takes is not a test's to judge
    assert s["last"]["extra_files"] == ["helpers.py"]  # what the engine placed before the prefix
    assert 0 < s["last"]["extra_tokens"] <= 128

    client.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"dllm": {"context": {"crossFile": False}}})
    )
    await inline(client, MAIN_URI, 2, len("scaled = frobnicate_widgets("))
    s = await status(client)
    assert s["settings"]["context"]["crossFile"] is False
    assert s["last"]["extra_files"] == [] and s["last"]["extra_tokens"] == 0
    assert s["model_calls"] == 2


async def test_pushed_and_saved_text_is_stored(client: LanguageClient) -> None:
    await start(client, settings=SETTINGS)
    open_doc(client, MAIN_URI, MAIN)
    client.protocol.notify("dllm/context", {"text": HELPERS})
    client.text_document_did_save(
        lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=MAIN_URI))
    )
    await inline(client, MAIN_URI, 2, len("scaled = frobnicate_widgets("))
    s = await status(client)
    sources = [(c["name"], c["source"]) for c in s["crossfile"]["chunks"]]
    assert ("", "push") in sources and ("main.py", "save") in sources
    assert s["crossfile"]["last"]["chosen"] == [""]  # the pushed text; never main.py's own
    assert s["last"]["extra_tokens"] > 0 and s["last"]["extra_files"] == [""]
