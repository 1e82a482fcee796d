"""Settings: initializationOptions and workspace/didChangeConfiguration; invalid values are a
message and fall back to the defaults, and the server keeps serving."""

from __future__ import annotations

import asyncio
import time

from lsp_client import GREET as SOURCE
from lsp_client import inline, open_doc, start, status, wait_for
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient


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
    await asyncio.sleep(0.8)  # past the 0.5 s a reload waits for quiet settings
    s = await status(client)
    assert s["state"] == "ready" and s["loads"] == 1  # the engine settings did not change


URI = "file:///work/settings.py"


async def test_a_span_past_the_model_is_one_warning_and_clamped(client: LanguageClient) -> None:
    await start(client, settings={"decode": {"maxSpan": 512, "span": 512}})
    await wait_for(lambda: any("maxSpan" in m.message for m in client.messages))
    open_doc(client, URI, SOURCE)
    items = await inline(client, URI, 2, 4)
    assert items, "completions keep working at the model's limit"
    s = await status(client)
    warned = [m for m in client.messages if "maxSpan" in m.message]
    assert len(warned) == 1 and "512" in warned[0].message and "384" in warned[0].message
    assert warned[0].type == lsp.MessageType.Warning
    assert any("decode.span" in m.message for m in client.messages)
    assert s["settings"]["decode"]["maxSpan"] < 384
    # a change of other settings while loaded does not repeat the warning
    client.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"dllm": {"candidates": 2}})
    )
    assert (await status(client))["settings"]["candidates"] == 2
    assert len([m for m in client.messages if "maxSpan" in m.message]) == 1


async def test_debounce_over_its_ceiling_is_a_warning(client: LanguageClient) -> None:
    await start(client, settings={"debounceMs": 1500})
    await wait_for(lambda: any("debounceMs" in m.message for m in client.messages))
    assert "400" in next(m.message for m in client.messages if "debounceMs" in m.message)
    assert (await status(client))["settings"]["debounceMs"] == 400
    open_doc(client, URI, SOURCE)
    t0 = time.monotonic()
    items = await inline(client, URI, 2, 4, invoked=False)
    assert time.monotonic() - t0 >= 0.4  # an automatic trigger waits the ceiling
    assert len(items) == 1
