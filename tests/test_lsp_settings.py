"""Settings: initializationOptions and workspace/didChangeConfiguration; invalid values are a
message and fall back to the defaults, and the server keeps serving."""

from __future__ import annotations

import pytest_lsp
from lsp_client import SERVER, start, status, wait_for
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    yield
    await lsp_client.shutdown_session()


async def test_invalid_initialization_options_are_messages_and_defaults(
    client: LanguageClient,
) -> None:
    bad = {"decode": {"threshold": 7, "blockSize": "big", "policy": "beam"}, "colour": "red"}
    await start(client, settings={**bad, "context": {"prefixTokens": 256}})
    s = await status(client)
    assert s["state"] == "ready"
    decode = s["settings"]["decode"]
    # null = the model's recommended τ, which status reports beside it
    assert decode["threshold"] is None and decode["blockSize"] == 32
    assert 0 < s["model_threshold"] <= 1
    assert decode["policy"] == "threshold"
    assert s["settings"]["context"]["prefixTokens"] == 256  # the valid value still applies
    shown = " | ".join(m.message for m in client.messages)
    for key in ("decode.threshold", "decode.blockSize", "decode.policy", "colour"):
        assert key in shown
    assert all(m.type == lsp.MessageType.Warning for m in client.messages)


async def test_did_change_configuration(client: LanguageClient) -> None:
    await start(client)
    client.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"dllm": {"decode": {"threshold": 0.7}}})
    )
    client.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"dllm": {"debounceMs": -5}})
    )
    await wait_for(lambda: any("debounceMs" in m.message for m in client.messages))
    s = await status(client)
    assert s["settings"]["decode"]["threshold"] == 0.7  # kept: the second change left it alone
    assert s["settings"]["debounceMs"] == 75.0
    assert any("debounceMs" in m.message for m in client.messages)
    assert s["state"] == "ready"  # the engine settings did not change: no reload
