"""How many of the project's functions, modules and threads one inline completion passes
through: a profiler on every thread records the project's calls during one automatic completion
of a small Python hole with the builtin model (warm). The model's own modules (the forward
pass) are left out. Run: .venv/bin/python tests/tools/hops.py  (docs/architecture.md)."""

from __future__ import annotations

import asyncio
import sys
import threading
from dataclasses import replace
from types import FrameType
from typing import Any

PROJECT = ("infill_engine", "lsp_server", "grammars")
FORWARD = ("infill_engine.models", "infill_engine.cache", "infill_engine.graphs")
calls: dict[tuple[str, str], int] = {}
threads: set[str] = set()
recording = threading.Event()


def profile(frame: FrameType, event: str, arg: Any) -> None:
    if event != "call" or not recording.is_set():
        return
    module = str(frame.f_globals.get("__name__", ""))
    if module.startswith(PROJECT) and not module.startswith(FORWARD):
        key = (module, frame.f_code.co_name)
        calls[key] = calls.get(key, 0) + 1
        threads.add(threading.current_thread().name)


def main() -> None:
    threading.setprofile(profile)  # before any thread of the engine starts
    sys.setprofile(profile)
    from infill_engine import load
    from lsp_server.completion.inline import Ask, Completer
    from lsp_server.engines.backend import Backend
    from lsp_server.options import Options

    engine = load("builtin", device="cpu")
    backend = Backend(lambda _: None, engine=engine)
    opts = Options()
    opts = replace(opts, completion=replace(opts.completion, debounce_ms=0))
    # trusted, so the model runs: an untrusted model's automatic request decides on the drafts
    # alone (decide.Policy.model_shown) and never reaches the engine
    opts = replace(opts, drafts=replace(opts.drafts, trust_model=True))
    text = "def add(a, b):\n    return \n\nprint(add(1, 2))\n"
    ask = Ask("file:///a.py", text, text.index("return ") + 7, "python", invoked=False)
    completer = Completer(backend, lambda _: None)
    asyncio.run(completer.complete(ask, opts))  # warm: grammars, caches, the worker
    completer.typeahead.clear()
    recording.set()
    asyncio.run(completer.complete(ask, opts))
    recording.clear()
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]
    modules = sorted({m for m, _ in calls})
    print(f"functions {len(calls)}  modules {len(modules)}  threads {sorted(threads)}")
    for m in modules:
        print(f"  {m}: {', '.join(sorted(f for mm, f in calls if mm == m))}")


if __name__ == "__main__":
    main()
