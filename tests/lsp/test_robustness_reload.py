"""Engine reloads under a burst of settings changes, end to end: the real server over stdio.

Ten `workspace/didChangeConfiguration` that toggle `dtype` within a second must coalesce into at
most two loads (the one in flight, then the final settings), end every progress bar they begin,
pop up nothing, and give the memory back.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from lsp_client import inline, open_doc, start, status
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

URI = "file:///work/reload.py"
SOURCE = 'def greet(name):\n    """Return a greeting for name."""\n    \n'
LOAD_TITLE = "dLLM: loading model"


def rss_mib(client: LanguageClient) -> float:
    """The server process's resident memory, from /proc."""
    assert client._server is not None
    for line in Path(f"/proc/{client._server.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def load_bars(client: LanguageClient) -> tuple[int, int]:
    """(begun, ended) work-done progress bars of model loads."""
    begun = ended = 0
    for reports in client.progress_reports.values():
        first = reports[0] if reports else None
        if isinstance(first, lsp.WorkDoneProgressBegin) and first.title == LOAD_TITLE:
            begun += 1
            ended += any(isinstance(r, lsp.WorkDoneProgressEnd) for r in reports)
    return begun, ended


async def settle(client: LanguageClient, loads_before: int) -> dict[str, Any]:
    """The status once a load after `loads_before` has run and every load bar has ended."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        s = await status(client)
        begun, ended = load_bars(client)
        if s["state"] == "ready" and s.get("loads", 0) > loads_before and begun == ended:
            return s
        await asyncio.sleep(0.2)
    raise TimeoutError("the reloads did not settle")


async def test_a_burst_of_reloads_coalesces(client: LanguageClient) -> None:
    await start(client)
    open_doc(client, URI, SOURCE)
    assert await inline(client, URI, 2, 4)
    loads_before = (await status(client)).get("loads", 0)
    rss_before = rss_mib(client)
    for i in range(10):
        dtype = "float32" if i % 2 == 0 else "auto"
        client.workspace_did_change_configuration(
            lsp.DidChangeConfigurationParams(settings={"dllm": {"dtype": dtype}})
        )
        await asyncio.sleep(0.08)

    await settle(client, loads_before)
    await asyncio.sleep(1.0)  # a late second load would begin here
    s = await settle(client, loads_before)
    assert s["state"] == "ready" and s["settings"]["dtype"] == "auto"
    assert await inline(client, URI, 2, 4)  # a completion after the burst still works

    popups = [m.message for m in client.messages]
    begun, ended = load_bars(client)
    loads = (await status(client)).get("loads", 0) - loads_before
    rss_after = rss_mib(client)
    print(f"loads {loads}, bars {begun}/{ended}, popups {popups}, RSS {rss_before:.0f}"
          f" -> {rss_after:.0f} MiB")  # fmt: skip
    assert popups == []
    assert begun == ended, f"{begun - ended} of {begun} load progress bars never ended"
    assert 1 <= loads <= 2
    assert begun <= 3  # the first load's bar, and at most two for the burst
    assert rss_after - rss_before < 40


async def test_settings_changes_during_a_load_end_with_the_latest(client: LanguageClient) -> None:
    await start(client)
    for device in ("cpu", "auto", "cpu"):
        client.workspace_did_change_configuration(
            lsp.DidChangeConfigurationParams(settings={"dllm": {"device": device}})
        )
    s = await settle(client, loads_before=1)
    assert s["state"] == "ready" and s["settings"]["device"] == "cpu"
    assert s["device"] == "cpu"
    assert client.messages == []


def test_a_reply_to_a_request_we_gave_up_on_is_dropped() -> None:
    """A reload that stopped waiting for `window/workDoneProgress/create` cancels its future; the
    client's late reply must not raise InvalidStateError out of the reader."""
    from concurrent.futures import Future

    from lsp_server.protocol.handlers import build_server
    from lsp_server.protocol.jsonrpc import RawMessage

    protocol = build_server().protocol
    future: Future[object] = Future()
    future.cancel()
    protocol._request_futures["late"] = future
    protocol.handle_message(RawMessage({"jsonrpc": "2.0", "id": "late", "result": None}))
    assert "late" not in protocol._request_futures
