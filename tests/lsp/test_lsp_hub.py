"""The language server's `model` setting takes a Hub name: the download (from a loopback Hub
stand-in) is reported to the editor as work-done progress, then the model completes. A name
the loader refuses is one short message, and the server keeps serving."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from conftest import make_dream
from hub_standin import HubStandIn, read_dir
from lsp_client import GREET, SERVER, StdioPeer, init_params, inline, open_doc, start, status
from lsprotocol import types as lsp
from pygls.protocol import default_converter
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


def test_a_model_name_too_long_or_refused_is_one_message_and_the_server_keeps_serving(
    tmp_path: Path,
) -> None:
    """A 100 KB `model` once wrote a 500 KB traceback to stderr. Now: past 1024 characters it is
    a settings message (the name cut) and the default; a name the system refuses (one part
    past 255 bytes) fails the load in one short popup, the name cut; a revision that is no ref
    is refused before anything is written; completions and status still answer."""
    outside = tmp_path / "written"
    peer = StdioPeer()
    try:
        settings = {"model": "x" * 100_000, "device": "cpu"}
        params = default_converter().unstructure(init_params(settings=settings))
        assert "result" in peer.reply(peer.ask("initialize", params))
        peer.notify("initialized", {})
        first = peer.wait_loaded()
        assert (first["state"], first["model"]) == ("ready", "builtin")
        peer.notify("workspace/didChangeConfiguration", {"settings": {"model": "y" * 300}})
        s = settled(peer, "y" * 300)
        assert s["state"] == "failed" and s["error"] == (
            f"model {'y' * 80!r}... (300 characters): not a usable path (File name too long)"
        )
        peer.notify(
            "workspace/didChangeConfiguration", {"settings": {"model": f"org/tiny@{outside}"}}
        )
        assert settled(peer, "builtin")["state"] == "ready"
        peer.open("file:///g.py", GREET)
        reply = peer.reply(peer.ask("textDocument/inlineCompletion", {
            "textDocument": {"uri": "file:///g.py"}, "position": {"line": 2, "character": 4},
            "context": {"triggerKind": 1},
        }))  # fmt: skip
        assert "result" in reply, reply
    finally:
        peer.kill()
    assert not outside.exists()
    assert b"Traceback" not in peer.stderr and len(peer.stderr) < 5000, bytes(peer.stderr[:5000])
    cut = f"{'x' * 80!r}... (100000 characters)"
    assert (
        f"dLLM: setting 'model': model {cut}: 100000 characters, more than the 1024 a model name "
        "or path may have; using the default 'builtin'"
    ) in peer.shown
    long = f"{'y' * 80!r}... (300 characters)"  # the popup cuts the name as the error does
    assert peer.errors == [
        f"dLLM: cannot load model {long}: model {long}: not a usable path (File name too long)"
    ], peer.errors
    assert (
        f"dLLM: setting 'model': model 'org/tiny@{outside}': the revision '{outside}' is not a "
        "branch, tag or commit name (it starts with '/'); using the default 'builtin'"
    ) in peer.shown
    assert all(len(m) < 1000 for m in peer.shown), [len(m) for m in peer.shown]


def settled(peer: StdioPeer, model: str) -> dict[str, Any]:
    """The status once the load of `model` has ended (ready or failed)."""
    deadline = time.monotonic() + 60
    while (s := peer.status())["model"] != model or s["state"] not in ("ready", "failed"):
        assert time.monotonic() < deadline, s
        time.sleep(0.05)
    return s
