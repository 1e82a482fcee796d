"""executeCommand and code actions end to end: fill a function body, regenerate and refine a
selection, each applied through workspace/applyEdit."""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Any

import pytest
import pytest_lsp
from lsp_client import SERVER, open_doc, plain, start, wait_for
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient
from tokenizers import Tokenizer

from infill_engine.finish import syntax
from infill_engine.loader import BUILTIN_DIR

URI = "file:///work/shapes.py"
SOURCE = (
    "import math\n\n\n"
    "def area(radius):\n"
    '    """Area of a circle."""\n'
    "    pass\n\n\n"
    "def scale(values, k):\n"
    "    out = []\n"
    "    for v in values:\n"
    "        out.append(v * k)\n"
    "    return out\n"
)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    lsp_client.edits = []  # type: ignore[attr-defined]

    @lsp_client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        lsp_client.edits.append(params)  # type: ignore[attr-defined]
        return lsp.ApplyWorkspaceEditResult(applied=True)

    yield
    await lsp_client.shutdown_session()


async def command(client: LanguageClient, name: str, *args: Any) -> Any:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=name, arguments=list(args))
    )


def only_edit(client: LanguageClient) -> tuple[lsp.TextEdit, str]:
    (params,) = client.edits  # type: ignore[attr-defined]
    (change,) = params.edit.document_changes
    assert change.text_document.uri == URI and change.text_document.version == 1
    (edit,) = change.edits
    return edit, params.label


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
async def test_a_selection_after_wide_characters_maps_both_ways(
    client: LanguageClient, encoding: str
) -> None:
    """A refine of `alpha`, mid-line after 😀 and 日本. Misread units shift the selection right
    by 6 (utf-16 units as code points) or 22 (utf-8 bytes as code points): either lands wholly
    in the run of spaces after `alpha`, which the server refuses as an empty selection. Read
    right, `alpha` is refined and the edit comes back on exactly the range that was sent."""
    await start(client, encodings=[encoding])
    head = 's = "😀😀😀😀😀😀 日本" + '
    line = head + "alpha" + " " * 30 + "# end"
    text = f"def f(alpha):\n    {line}\n    return s\n"
    open_doc(client, URI, text)

    def units(s: str) -> int:
        return len(s.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(s.encode())

    col = units("    " + head)
    assert col != len("    " + head)  # the test means something only if the encodings differ
    rng = {"start": {"line": 1, "character": col}, "end": {"line": 1, "character": col + 5}}
    result = await command(client, "dllm.refineSelection", URI, rng)
    assert result["applied"] is True, result
    edit, _ = only_edit(client)
    assert edit.range == lsp.Range(
        lsp.Position(line=1, character=col), lsp.Position(line=1, character=col + 5)
    )


async def test_fill_function_body_applies_a_clean_edit_or_says_why_not(
    client: LanguageClient,
) -> None:
    await start(client)
    open_doc(client, URI, SOURCE)
    result = await command(client, "dllm.fillFunctionBody", URI, {"line": 5, "character": 6})
    if result["applied"] is True:
        edit, label = only_edit(client)
        # The body after the docstring ("    pass") is what gets replaced, whole line.
        assert edit.range == lsp.Range(
            lsp.Position(line=5, character=0), lsp.Position(line=5, character=8)
        )
        assert edit.new_text.strip() and edit.new_text.startswith("    ")
        assert "area()" in label
        lines = SOURCE.split("\n")
        after = "\n".join(lines[:5]) + "\n" + edit.new_text + "\n".join(lines[5:])[8:]
        assert syntax.error_count(after, "python") == 0, after
    else:  # the model's body would break the document: nothing is sent, and the user is told
        assert not client.edits  # type: ignore[attr-defined]
        assert re.search(r"area\(\)|syntax error", result["message"]), result
        assert any("fill function body" in m.message for m in client.log_messages)
    # Work-done progress framed the command.
    titles = [v.title for vs in client.progress_reports.values() for v in vs if hasattr(v, "title")]
    assert "dLLM: fill function body" in titles


async def test_fill_outside_a_function_is_a_message(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, SOURCE)
    result = await command(client, "dllm.fillFunctionBody", URI, {"line": 0, "character": 3})
    assert result["applied"] is False
    assert client.edits == []  # type: ignore[attr-defined]
    await wait_for(lambda: any("no function" in m.message for m in client.messages))
    bad = await command(client, "dllm.fillFunctionBody", "file:///not/open.py", {"line": 0})
    assert bad["applied"] is False and "not open" in bad["message"]


async def test_refactor_action_appears_only_on_a_selection(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, SOURCE)

    # lsprotocol's client-side hook reads any object with a "command" key as a Command, which
    # drops CodeAction.kind; read the reply untyped instead, as an editor would see the JSON.
    client.protocol.get_result_type = lambda method: None  # type: ignore[method-assign]

    async def actions(start: tuple[int, int], end: tuple[int, int]) -> list[Any]:
        rng = lsp.Range(lsp.Position(*start), lsp.Position(*end))
        params = lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=URI),
            range=rng,
            context=lsp.CodeActionContext(diagnostics=[]),
        )
        reply = await client.protocol.send_request_async(lsp.TEXT_DOCUMENT_CODE_ACTION, params)
        return [plain(a) for a in reply or []]

    assert await actions((10, 4), (10, 4)) == []  # a cursor, no selection
    found = await actions((10, 4), (11, 25))
    assert [a["kind"] for a in found] == ["refactor.rewrite"] * 2
    assert [a["command"]["command"] for a in found] == [
        "dllm.refactorSelection",
        "dllm.refineSelection",
    ]
    assert found[0]["command"]["arguments"][0] == URI


async def test_regenerate_selection_replaces_exactly_the_selection(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, SOURCE)
    rng = {"start": {"line": 11, "character": 8}, "end": {"line": 11, "character": 25}}
    result = await command(client, "dllm.refactorSelection", URI, rng, "use a list comprehension")
    assert result["applied"] is True
    edit, _ = only_edit(client)
    assert edit.range == lsp.Range(
        lsp.Position(line=11, character=8), lsp.Position(line=11, character=25)
    )
    assert edit.new_text.strip()
    assert "list comprehension" not in edit.new_text  # the instruction is context, not content


async def test_refine_keeps_most_of_the_selection(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, SOURCE)
    rng = {"start": {"line": 9, "character": 0}, "end": {"line": 12, "character": 14}}
    result = await command(client, "dllm.refineSelection", URI, rng)
    if result["applied"] is not True:
        # The refined text would break the document: nothing is sent, and the user is told why.
        assert not client.edits  # type: ignore[attr-defined]
        assert "not applied" in result["message"] and "syntax error" in result["message"]
        return
    edit, label = only_edit(client)
    assert "refined" in label
    old = "".join(SOURCE.splitlines(keepends=True)[9:13])[:-1]
    changed, remasked = map(
        int, re.fullmatch(r"dLLM: refined (\d+) of (\d+) unlikely tokens", label).groups()
    )
    assert remasked >= 1 and changed <= remasked
    assert (changed == 0) == (edit.new_text == old)
    # Only remasked tokens may change: the rest of the text is the user's, token for token.
    tok = Tokenizer.from_file(str(BUILTIN_DIR / "tokenizer.json"))
    a, b = tok.encode(old).ids, tok.encode(edit.new_text).ids
    moved = sum(
        i2 - i1 for op, i1, i2, _, _ in SequenceMatcher(None, a, b).get_opcodes() if op != "equal"
    )
    assert moved <= 2 * remasked  # slack: a changed token may re-tokenize with a neighbour
