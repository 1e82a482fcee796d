"""Initialize: capabilities, position encoding, model load with progress, load failures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from lsp_client import init_params, inline, open_doc, start, status, wait_for
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient


async def test_capabilities_are_advertised(client: LanguageClient) -> None:
    result = await start(client)
    caps = result.capabilities
    assert caps.inline_completion_provider is not None
    assert caps.execute_command_provider is not None
    assert set(caps.execute_command_provider.commands) >= {
        "dllm.fillFunctionBody",
        "dllm.refactorSelection",
        "dllm.refineSelection",
    }
    actions = caps.code_action_provider
    assert isinstance(actions, lsp.CodeActionOptions)
    assert list(actions.code_action_kinds or []) == [lsp.CodeActionKind.RefactorRewrite]
    sync = caps.text_document_sync
    kind = sync.change if isinstance(sync, lsp.TextDocumentSyncOptions) else sync
    assert kind == lsp.TextDocumentSyncKind.Incremental
    assert caps.position_encoding == lsp.PositionEncodingKind.Utf16
    assert result.server_info is not None and result.server_info.name == "dllm-infill-ls"


async def test_model_load_reports_progress(client: LanguageClient) -> None:
    await start(client)
    s = await status(client)
    expected = "cuda" if torch.cuda.is_available() else "cpu"  # device "auto"
    assert s["state"] == "ready" and s["model"] == "builtin"
    assert s["device"].split(":")[0] == expected
    reports = [v for values in client.progress_reports.values() for v in values]
    kinds = [type(v).__name__ for v in reports]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert reports[-1].message == "model ready"


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [(["utf-32", "utf-8", "utf-16"], "utf-8"), (["utf-32", "utf-16"], "utf-16"), ([], "utf-16")],
)
async def test_position_encoding_is_negotiated(
    client: LanguageClient, offered: list[str], chosen: str
) -> None:
    result = await client.initialize_session(init_params(encodings=offered))  # [] is sent as []
    assert result.capabilities.position_encoding == chosen


async def test_a_bad_model_dir_is_a_message_and_the_server_keeps_serving(
    client: LanguageClient, tmp_path: Path
) -> None:
    (tmp_path / "config.json").write_text("{ not json")
    await start(client, settings={"model": str(tmp_path)})
    s = await status(client)
    assert s["state"] == "failed" and "config.json" in s["error"]
    await wait_for(lambda: any("cannot load model" in m.message for m in client.messages))
    # Requests still get answers: empty ones.
    open_doc(client, "file:///x.py", "x = 1\n")
    items = await inline(client, "file:///x.py", 0, 4)
    assert items == []


@pytest.mark.parametrize(
    ("name", "garbage"),
    [
        ("model.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json"),
        ("tokenizer.json", b'{"version": 1, garbage'),
    ],
)
async def test_a_corrupt_model_file_fails_the_load_and_the_user_is_told(
    client: LanguageClient, dream_dir: Path, tmp_path: Path, name: str, garbage: bytes
) -> None:
    # Each library raises its own error type for a corrupt file; the load once stayed
    # "loading" for ever on them, and the user heard nothing.
    model = tmp_path / "model"
    shutil.copytree(dream_dir, model)
    (model / name).write_bytes(garbage)
    await start(client, settings={"model": str(model), "device": "cpu"})
    s = await status(client)
    assert s["state"] == "failed" and name in s["error"], s
    await wait_for(lambda: any(name in m.message for m in client.messages))
    reports = [v for values in client.progress_reports.values() for v in values]
    assert reports and reports[-1].message == "model failed to load"
