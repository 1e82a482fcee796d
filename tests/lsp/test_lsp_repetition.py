"""No repetition loop as ghost text: a blank line inside `with open(path) as f:` is where the
builtin model writes `path.path.path.` until its span runs out; the real server over stdio shows
nothing of it (the finishing steps cut the loop), whatever else it offers there."""

from __future__ import annotations

from lsp_client import inline, item_text, open_doc, start
from pytest_lsp import LanguageClient

from infill_engine.repeat import find_loop

URI = "file:///work/read.py"
SOURCES = [
    "with open(path) as f:\n    \n",
    "import os\n\n\ndef load(path):\n    with open(path) as f:\n        \n",
]


async def test_a_repetition_loop_is_never_shown(client: LanguageClient) -> None:
    await start(client)
    for n, source in enumerate(SOURCES):
        uri = URI.replace(".py", f"{n}.py")
        open_doc(client, uri, source)
        line = source.count("\n") - 1  # the blank line in the `with` block
        column = len(source.split("\n")[line])
        for invoked in (True, False):
            for item in await inline(client, uri, line, column, invoked=invoked):
                text = item_text(item)
                assert find_loop(text) is None, text
                assert text.count("path") < 4, text
