"""Settings: initializationOptions and workspace/didChangeConfiguration; invalid values are a
message and fall back to the defaults, and the server keeps serving.

What only the server's own logic decides (whether a change reloads the model, how long an
automatic trigger waits) is checked in-process, on a `DllmServer` whose load and debounce wait
are recorded instead of run: no test waits for a quiet period or measures a delay."""

from __future__ import annotations

from dataclasses import replace

import pytest
from lsp_client import GREET as SOURCE
from lsp_client import inline, open_doc, start, status, wait_for
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_server.completion.inline import Ask
from lsp_server.options import Options
from lsp_server.protocol.handlers import RELOAD_QUIET_S, DllmServer


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
    assert s["state"] == "ready" and s["loads"] == 1


class Server:
    """A `DllmServer` in this process: what it would load (the quiet period it would wait
    first) and what it would tell the user are recorded, nothing runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, settings: object) -> None:
        self.ls = DllmServer()
        self.loads: list[float] = []
        self.told: list[str] = []
        monkeypatch.setattr(self.ls, "start_load", lambda quiet_s=0.0: self.loads.append(quiet_s))
        monkeypatch.setattr(self.ls, "tell", lambda message, kind=None: self.told.append(message))
        self.ls.apply_settings(settings, initial=True)  # initialize; `initialized` loads


def test_only_a_change_of_engine_settings_reloads(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server(monkeypatch, {})
    ls = server.ls
    ls.apply_settings({"dllm": {"decode": {"threshold": 0.7}}})
    ls.apply_settings({"dllm": {"debounceMs": -5}})
    assert server.loads == []  # decoding and debounce settings: the loaded model serves them
    assert ls.settings.decode.threshold == 0.7  # kept: the second change left it alone
    assert ls.settings.completion.debounce_ms == 75.0
    assert len(server.told) == 1 and "debounceMs" in server.told[0]
    ls.apply_settings({"dllm": {"model": "/models/other"}})
    assert server.loads == [RELOAD_QUIET_S]  # a new model: loaded once the settings are quiet
    ls.apply_settings({"dllm": {"model": "/models/other", "candidates": 2}})
    assert server.loads == [RELOAD_QUIET_S]  # the same model again: nothing more to load
    ls.apply_settings({"dllm": {"device": "cpu"}})
    assert server.loads == [RELOAD_QUIET_S] * 2


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
    items = await inline(client, URI, 2, 4, invoked=False)
    assert len(items) == 1  # automatic: one candidate, after the wait checked below


async def test_an_automatic_trigger_waits_the_debounce_ceiling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(monkeypatch, {"debounceMs": 1500})
    assert len(server.told) == 1 and "400" in server.told[0]
    completer = server.ls.completer
    waited: list[float] = []

    async def wait(now_s: float | None = None) -> None:  # the delay it would sleep, in ms
        waited.append(completer.debounce.delay_ms())

    async def from_model(ask: Ask, opts: Options) -> list[str]:
        return [f"fill {len(waited)}"]

    monkeypatch.setattr(completer.debounce, "wait", wait)
    monkeypatch.setattr(completer, "_from_model", from_model)
    offset = SOURCE.index("\n    \n") + 5
    automatic = Ask("file:///work/a.py", SOURCE, offset, "python", invoked=False)
    assert await completer.complete(automatic, server.ls.options) == ["fill 1"]
    assert waited == [400.0]  # the ceiling, not the 1500 asked for
    invoked = replace(automatic, uri="file:///work/b.py", invoked=True)
    assert await completer.complete(invoked, server.ls.options) == ["fill 1"]
    assert waited == [400.0]  # the user asked: no wait
