"""Other files' chunks through both engine clients: the same hole with the same chunks, sent to
a real `dllm-infill serve` on a Unix socket (engine_service.py) and run in process
(in_process.py), is placed and filled the same way, and each says which chunks the model saw."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from infill_engine import Engine, InfillParams, load
from infill_engine.scheduler import Scheduler
from infill_engine.service import Address, Service, ServiceThread
from lsp_server.engines.backend import Backend
from lsp_server.engines.engine_client import Hole
from lsp_server.options import EngineOptions

TEXT = "from helpers import frobnicate_widgets\n\nscaled = frobnicate_widgets(\n"
HELPERS = "def frobnicate_widgets(widgets, factor):\n    return [w * factor for w in widgets]\n"
OTHER = "".join(f"value_{i} = {i}\n" for i in range(80))


def hole(extra_tokens: int) -> Hole:
    return Hole(
        TEXT, TEXT.index("(\n") + 1, None, "python", "invoked", 1, 64, 32,
        InfillParams(span=6, max_span=6, min_tokens=1), threading.Event(),
        extra=(("shapes.py", OTHER), ("helpers.py", HELPERS)), extra_tokens=extra_tokens,
    )  # fmt: skip


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


async def test_remote_and_local_place_the_same_chunks(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    thread = ServiceThread(
        Service(engine, "builtin", scheduler=Scheduler(engine.live_batch, max_batch=4)),
        Address("unix", path=path),
    )
    thread.start()
    remote = Backend(lambda _: None)
    local = Backend(lambda _: None, engine=engine)
    try:
        await remote.load(EngineOptions(address=f"unix:{path}"), lambda _: None)
        assert remote.state == "ready", remote.error
        got, want = await remote.fill(hole(48)), await local.fill(hole(48))
        assert got.extra == want.extra and got.extra[-1] == "helpers.py"
        assert got.extra_tokens == want.extra_tokens and 0 < got.extra_tokens <= 48
        assert [r.text for r in got.results] == [r.text for r in want.results]
        assert remote.status()["last"]["extra_files"] == list(got.extra)
        off = await remote.fill(hole(0))  # no budget: nothing sent, nothing placed
        assert off.extra == () and off.extra_tokens == 0
    finally:
        remote.close()
        thread.stop()
