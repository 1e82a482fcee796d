"""Planning a fill runs off the language server's event loop: the real server over stdio, a
large document (a Lua file of 3 MB: no grammar, so no parse and no syntax check take the
loop's time), and `dllm/status` asked over and over while an invoked completion is prepared
(planned, its context cut and tokenized, its drafts gathered from the document: about 0.65 s
of Python on the 2-core CPU machine). Drafting reads the rows within NEAR_ROWS of the cursor
(drafts/nearby.py), so the document's 3,984 rows are long ones, all within reach: in many
short rows the drafts would cost milliseconds. Every status answer comes back at once: the
loop reads the editor's messages (didChange, cancel) while the plan is made."""

from __future__ import annotations

import time
from typing import Any

from lsp_client import StdioPeer, init_params
from pygls.protocol import default_converter

from infill_engine.drafts.nearby import NEAR_ROWS

STEPS = "".join(f" local v{k} = a * {k} + b - {{i}};" for k in range(24))
UNIT = "local function f{i}(a, b)" + STEPS + " return v23 * {i} end\n"  # 770 characters
HOLE = "local function greet(name)\n  "
URI = "file:///work/big.lua"
SETTINGS = {
    "languages": ["lua"],
    "modelLanguages": ["lua"],  # the builtin model's card says Python: its fills run here too
    "candidates": 1,
    "decode": {"policy": "fixed", "span": 8, "maxSpan": 8},
    "context": {"maxDocumentChars": 4_000_000},  # past the 2 MB default
}


def document(functions: int) -> str:
    half = "".join(UNIT.format(i=i) for i in range(functions // 2))
    return half + HOLE + "\nend\n\n" + half


def position(text: str) -> dict[str, int]:
    before = text[: text.index(HOLE) + len(HOLE)]
    return {"line": before.count("\n"), "character": len(before) - before.rfind("\n") - 1}


def complete(server: StdioPeer, text: str) -> int:
    return server.ask(
        "textDocument/inlineCompletion",
        {
            "textDocument": {"uri": URI},
            "position": position(text),
            "context": {"triggerKind": 1},  # invoked: no debounce
        },
    )


def answered(server: StdioPeer, msg_id: int, timeout: float = 300.0) -> dict[str, Any]:
    reply = server.reply(msg_id, timeout=timeout)
    assert "result" in reply, reply
    return reply


def test_the_loop_answers_while_a_large_document_is_planned() -> None:
    server = StdioPeer()
    try:
        params = default_converter().unstructure(init_params(settings=SETTINGS))
        answered(server, server.ask("initialize", params))
        server.notify("initialized", {})
        assert server.wait_loaded()["state"] == "ready"
        text = document(3_980)
        assert len(text) > 3_000_000 and text.count("\n") + 2 <= 2 * NEAR_ROWS + 1
        doc = {"uri": URI, "languageId": "lua", "version": 1, "text": text}
        server.notify("textDocument/didOpen", {"textDocument": doc})
        answered(server, complete(server, text))  # the first fill: one-time costs paid

        # an edit above the hole (what the user typed): the next request plans anew
        at = {"line": 0, "character": 0}
        text = "-- edited\n" + text
        server.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": URI, "version": 2},
                "contentChanges": [{"range": {"start": at, "end": at}, "text": "-- edited\n"}],
            },
        )
        started = time.monotonic()
        fill = complete(server, text)
        waits: list[float] = []
        while True:
            asked = time.monotonic()
            server.status()
            waits.append(time.monotonic() - asked)
            try:
                reply = server.reply(fill, timeout=0.01)
                break
            except TimeoutError:
                continue
        took = time.monotonic() - started
        assert "result" in reply, reply
        assert server.status()["model_calls"] >= 2  # both fills ran the model
        # Planning this document takes most of the fill's time: on the loop, a status asked
        # meanwhile waited for nearly all of it (0.47 s of a 0.57 s fill); off it, at most for one
        # garbage collection of the whole heap, which holds every thread (0.17 s of 0.6 s).
        assert took > 0.3, f"the fill took {took:.2f} s: too light to tell"
        assert max(waits) < 0.5 * took, ([round(w, 3) for w in waits], took)
    finally:
        server.kill()
