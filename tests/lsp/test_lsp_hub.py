"""The language server's `model` setting takes a Hub name: the download (from a loopback Hub
stand-in) is reported to the editor as work-done progress, then the model completes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from conftest import make_dream
from hub_standin import HubStandIn, read_dir
from lsp_client import GREET, SERVER, inline, open_doc, start, status
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient


@pytest_asyncio.fixture
async def hub_client(tmp_path: Path) -> AsyncIterator[tuple[LanguageClient, HubStandIn]]:
    make_dream(tmp_path / "src", shards=2)
    with HubStandIn() as hub:
        hub.repo("org/tiny").add(read_dir(tmp_path / "src"))
        env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf"))
        env.pop("HF_HUB_OFFLINE", None)
        client = await ClientServerConfig(server_command=SERVER, server_env=env).start()
        yield client, hub
        await client.shutdown_session()
        await client.stop()


async def test_a_hub_name_downloads_with_progress(
    hub_client: tuple[LanguageClient, HubStandIn],
) -> None:
    client, hub = hub_client
    await start(client, settings={"model": "org/tiny", "device": "cpu"})
    s = await status(client)
    assert s["state"] == "ready", s
    reports = [v for values in client.progress_reports.values() for v in values]
    downloading = [
        r.message for r in reports
        if isinstance(r, lsp.WorkDoneProgressReport) and "downloading org/tiny" in (r.message or "")
    ]  # fmt: skip
    assert downloading and downloading[-1].endswith("(100%)"), reports
    assert reports[-1].message == "model ready"
    assert any(p.endswith(".safetensors") for m, p, _ in hub.requests if m == "GET")
    open_doc(client, "file:///g.py", GREET)
    items = await inline(client, "file:///g.py", 2, 4)
    assert isinstance(items, list)  # a tiny random model: an answer, not a useful one
