"""The workspace index's cost on a real folder: the time to build it, the memory it adds, and the
time of one update (a save) and of one request's drafts. Run:
    .venv/bin/python tests/tools/bench_index.py FOLDER [FOLDER ...]   (docs/drafts.md)"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

from infill_engine.workspace.index import WorkspaceIndex


def main(folders: list[Path]) -> None:
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    index = WorkspaceIndex()
    files = index.build(folders)
    build_s = time.perf_counter() - t0
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    status = index.status()
    paths = sorted(index.paths())
    updates = []
    for p in paths[:: max(1, len(paths) // 50)]:
        t = time.perf_counter()
        index.update(p)
        updates.append((time.perf_counter() - t) * 1000)
    asks = []
    for p in paths[:: max(1, len(paths) // 30)]:
        text = p.read_text()
        cut = text.find("\n", len(text) // 2) + 1
        t = time.perf_counter()
        index.drafts(p.as_uri(), text, cut)
        asks.append((time.perf_counter() - t) * 1000)
    print(f"{files} files, {status['lines']} lines: built in {build_s:.2f} s, "
          f"{held / 2**20:.1f} MiB held; update p50 {statistics.median(updates):.2f} ms "
          f"(max {max(updates):.2f}); drafts p50 {statistics.median(asks):.1f} ms "
          f"(max {max(asks):.1f})")  # fmt: skip


if __name__ == "__main__":
    main([Path(a) for a in sys.argv[1:]])
