"""An engine service that is not there (engineAddress down): the user is told the service is
unreachable, not that a model cannot load, since no model loads in this process."""

from __future__ import annotations

import socket

from lsp_client import start, status, wait_for
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_unreachable_engine_service_is_named_as_such(client: LanguageClient) -> None:
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    await start(client, settings={"engineAddress": address, "engineToken": "t"})
    s = await status(client)
    assert s["state"] == "failed" and "unreachable" in s["error"], s
    await wait_for(lambda: any("unreachable" in m.message for m in client.messages))
    errors = [m.message for m in client.messages if m.type == lsp.MessageType.Error]
    assert any(address.removeprefix("tcp://") in m for m in errors), errors
    assert not any("cannot load model" in m for m in errors), errors
    reports = [v for values in client.progress_reports.values() for v in values]
    assert reports and reports[-1].message == "engine service out of reach"
