"""Start-up time and memory of the language server: in-process (the builtin model loaded in the
server) against a thin client of an engine service (`engineAddress`, the model in the service).

For each mode and run, a fresh `python -m lsp_server` on stdio: process start -> `initialize`
answered -> the first invoked inline completion answered (the request is sent right after
`initialized`; the server holds it until the engine is ready), then the server's RSS (VmRSS)
and peak RSS (VmHWM) from /proc. The service runs in this process on a Unix socket, loaded
once, before any run. Medians over the runs are printed as a Markdown table (docs/lsp.md).

Run: .venv/bin/python tests/tools/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: lsp_client

from lsp_client import GREET, SERVER, StdioPeer, init_params
from pygls.protocol import default_converter

URI = "file:///work/startup.py"
TOKEN = "startup-token"


def rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process, in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def server_command(root: str | None) -> list[str]:
    """The server, or the one of another checkout of the repository (`--server-root`)."""
    if root is None:
        return SERVER
    run = f"import sys; sys.path.insert(0, {root!r}); from lsp_server.cli import main; main()"
    return [sys.executable, "-c", run, "--log-level", "WARNING"]


def one_run(settings: dict[str, Any], command: list[str]) -> dict[str, float]:
    t0 = time.perf_counter()
    peer = StdioPeer(command)
    try:
        params = default_converter().unstructure(init_params(settings=settings))
        reply = peer.reply(peer.ask("initialize", params), timeout=120)
        assert "result" in reply, reply
        t_init = time.perf_counter()
        peer.notify("initialized", {})
        peer.open(URI, GREET)
        position = {"line": 2, "character": 4}
        ask = {"textDocument": {"uri": URI}, "position": position, "context": {"triggerKind": 1}}
        reply = peer.reply(peer.ask("textDocument/inlineCompletion", ask), timeout=300)
        t_first = time.perf_counter()
        items = reply["result"]["items"]
        assert items, (reply, peer.errors, peer.stderr[-2000:])
        rss, peak = rss_mib(peer.proc.pid)
        status = peer.status()
    finally:
        peer.kill()
    return {
        "initialize_ms": (t_init - t0) * 1000,
        "first_ms": (t_first - t0) * 1000,
        "rss_mib": rss,
        "peak_mib": peak,
        # 1 or 0; -1: a server from before `torch_loaded`
        "torch": float(status["torch_loaded"]) if "torch_loaded" in status else -1.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--server-root", help="run the server of this checkout (a before/after)")
    a = ap.parse_args()
    command = server_command(a.server_root)
    from infill_engine import load
    from infill_engine.scheduler import Scheduler
    from infill_engine.service import Address, Service, ServiceThread, parse_address

    engine = load("builtin", device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        sock = f"{tmp}/s.sock"
        front = Service(
            engine, "builtin", TOKEN, scheduler=Scheduler(engine.live_batch)
        )  # one service, both fronts
        service = ServiceThread(front, Address("unix", path=sock))
        service.start()
        http = ServiceThread(front, parse_address("http://127.0.0.1:0"))
        http.start()
        assert http.bound is not None
        common = {"candidates": 1, "debounceMs": 0, "engineToken": TOKEN}
        modes = {
            "in-process (builtin)": {**common, "model": "builtin", "device": "cpu"},
            "engineAddress (unix:)": {**common, "engineAddress": f"unix:{sock}", "model": "/x"},
        }
        if a.server_root is None:  # a checkout from before the thin client knows no http://
            address = f"http://127.0.0.1:{http.bound.port}"
            modes["engineAddress (http://)"] = {**common, "engineAddress": address, "model": "/x"}
        runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
        try:
            for _ in range(a.runs):  # the modes alternate: a change in the machine's load hits all
                for mode, settings in modes.items():
                    runs[mode].append(one_run(settings, command))
        finally:
            http.stop()
            service.stop()
            engine.close()
    print(f"medians of {a.runs} runs")
    head = ("mode", "initialize answered ms", "first completion ms", "RSS MiB", "peak MiB", "torch")
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    for mode, rows in runs.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        torch = {1.0: "yes", 0.0: "no"}.get(med["torch"], "?")
        print(
            f"| {mode} | {med['initialize_ms']:.0f} | {med['first_ms']:.0f} | "
            f"{med['rss_mib']:.0f} | {med['peak_mib']:.0f} | {torch} |"
        )


if __name__ == "__main__":
    main()
