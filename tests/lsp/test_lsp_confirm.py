"""Commands never overwrite working code without asking, end to end over stdio: a stub body is
filled at once; a body with code goes out as a WorkspaceEdit whose change annotation needs
confirmation (the editor asks; until it answers nothing changes), or, for an editor that cannot
ask, is refused with a message before the model runs."""

from __future__ import annotations

from typing import Any

import pytest_lsp
from lsp_client import SERVER, open_doc, start, wait_for
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

URI = "file:///work/clamp.py"
FINISHED = (
    "def clamp(value, low, high):\n"
    '    """Limit value to the range [low, high]."""\n'
    "    return value\n"
)
STUB = 'def clamp(value, low, high):\n    """Limit value to the range [low, high]."""\n    pass\n'


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    lsp_client.edits = []  # type: ignore[attr-defined]
    lsp_client.confirm = False  # type: ignore[attr-defined]  # the user's answer

    @lsp_client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        lsp_client.edits.append(params)  # type: ignore[attr-defined]
        asks = any(a.needs_confirmation for a in (params.edit.change_annotations or {}).values())
        ok = not asks or lsp_client.confirm  # type: ignore[attr-defined]
        return lsp.ApplyWorkspaceEditResult(applied=bool(ok))

    yield
    await lsp_client.shutdown_session()


async def fill(client: LanguageClient, line: int) -> Any:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(
            command="dllm.fillFunctionBody", arguments=[URI, {"line": line, "character": 4}]
        )
    )


async def test_an_editor_without_annotations_is_refused_and_nothing_changes(
    client: LanguageClient,
) -> None:
    await start(client)  # no changeAnnotationSupport: Neovim's built-in client, for one
    open_doc(client, URI, FINISHED)
    result = await fill(client, 2)
    assert result["applied"] is False and "has code" in result["message"], result
    assert client.edits == []  # type: ignore[attr-defined]
    await wait_for(lambda: any("cannot ask" in m.message for m in client.messages))
    # refused before the model ran: the engine saw no request
    status = await client.protocol.send_request_async("dllm/status", None)
    assert status.requests == 0, status


async def test_code_is_replaced_only_through_a_confirmed_annotation(
    client: LanguageClient,
) -> None:
    await start(client, annotations=True)
    open_doc(client, URI, FINISHED)
    result = await fill(client, 2)
    (params,) = client.edits  # type: ignore[attr-defined]
    (change,) = params.edit.document_changes
    (edit,) = change.edits
    assert isinstance(edit, lsp.AnnotatedTextEdit), edit
    note = params.edit.change_annotations[edit.annotation_id]
    assert note.needs_confirmation is True and "clamp()" in note.label
    # declined: the server says so, and reports nothing applied
    assert result["applied"] is False, result
    await wait_for(lambda: any("not confirmed" in m.message for m in client.messages))
    client.confirm = True  # type: ignore[attr-defined]
    again = await fill(client, 2)
    assert again["applied"] is True, again
    assert len(client.edits) == 2  # type: ignore[attr-defined]


async def test_a_stub_body_is_filled_without_a_question(client: LanguageClient) -> None:
    await start(client, annotations=True)
    open_doc(client, URI, STUB)
    result = await fill(client, 2)
    (params,) = client.edits  # type: ignore[attr-defined]
    assert result["applied"] is True, result
    assert not params.edit.change_annotations
    (change,) = params.edit.document_changes
    assert change.edits, "a filled body is at least one edit"
    assert all(
        isinstance(e, lsp.TextEdit) and not hasattr(e, "annotation_id") for e in change.edits
    )
