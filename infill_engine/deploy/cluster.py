"""The life of the Ray cluster `serve --ray` starts or joins: `start_cluster` (a local one sized
to the replicas' CPUs, or a join) and `stop_cluster`, which takes a local one down in a few
seconds and leaves no Ray process behind.

Why stopping needs its own code: a terminal's Ctrl-C or a container stop signals the whole
process group, so Ray's GCS, raylet and workers get the SIGTERM together with this process.
Serve's teardown calls to a GCS that has gone retry for 60 s at high CPU before Ray aborts the
process, and `ray.shutdown` itself flushes task events to the GCS for 5 s and then stops the
processes `ray.init` started one after the other, a second or more each. So for a local cluster
Serve's teardown is skipped (the cluster goes whole), the task-event flush is bounded before
`ray.init` reads it, and every process under this one (the node's and the workers under the
raylet) gets SIGTERM at once, SIGKILL after `GRACE_S`, and is waited for. The processes are
found through /proc by parent; elsewhere `ray.shutdown` alone stops them, more slowly.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path

import ray
from ray import serve

from ..service.listen import ServeError
from .spec import APPLICATION, ReplicaSpec, Scaling

GRACE_S = 1.0  # SIGTERM to SIGKILL, as ray.shutdown gives each process; the cluster goes whole
REAP_S = 2.0  # after SIGKILL, how long to wait for the kernel to take them
FLUSH_MS = "300"  # the driver's last task-event flush to the GCS (Ray's default is 5000)
PROC = Path("/proc")


def start_cluster(ray_address: str | None, spec: ReplicaSpec, scaling: Scaling) -> None:
    """Join the cluster at `ray_address` ("auto": the one `ray start` made on this machine), or
    start a local one, which must hold the replicas' CPUs (Serve would wait for them forever)."""
    if ray_address:
        ray.init(address=ray_address, logging_level=logging.WARNING)
        return
    cpus = os.cpu_count() or 1
    need = spec.threads * (scaling.max_replicas or scaling.replicas)
    if need > cpus:
        raise ServeError(
            f"{need} replica CPUs (replicas x --threads) do not fit this machine's {cpus}; "
            "fewer replicas or threads, or join a larger cluster with --ray-address"
        )
    # Read by this process's core worker at ray.init; a value set by the user wins.
    os.environ.setdefault("RAY_task_events_shutdown_flush_timeout_ms", FLUSH_MS)
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)


class Processes:
    """The processes under this one, noted while they run: in a group signal the raylet can
    exit before its workers, which then move to another parent, so the workers are known from
    an earlier look. A process is (pid, start time), so a reused pid is never signalled."""

    def __init__(self) -> None:
        self.seen: set[tuple[int, str]] = set()

    def note(self) -> None:
        """Adds the processes now under this one."""
        self.seen.update(descendants(os.getpid()))

    def end(self) -> None:
        """SIGTERM to all at once, SIGKILL to those still running after `GRACE_S`; returns when
        all have exited (a zombie has: its parent reaps it) or `REAP_S` after the SIGKILL."""
        self.note()
        for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, REAP_S)):
            running = [p for p in self.seen if alive(p)]
            for pid, _ in running:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait_s
            while running and time.monotonic() < deadline:
                time.sleep(0.05)
                running = [p for p in running if alive(p)]
            if not running:
                return


def stop_cluster(ray_address: str | None, processes: Processes) -> None:
    """Take the application down. From a joined cluster only the application goes, and the
    cluster keeps running; a local cluster goes whole, with every process under this one."""
    if ray_address:
        try:
            serve.delete(APPLICATION)
        finally:
            ray.shutdown()
        return
    processes.end()
    ray.shutdown(wait_for_processes=True)  # finds its processes gone: disconnects and returns


def descendants(root: int) -> set[tuple[int, str]]:
    """Every process under `root` as (pid, start time), from /proc; empty where there is none."""
    children: dict[int, list[tuple[int, str]]] = {}
    for pid, fields in stats():
        children.setdefault(int(fields[1]), []).append((pid, fields[19]))
    found: set[tuple[int, str]] = set()
    todo = list(children.get(root, []))
    while todo:
        proc = todo.pop()
        found.add(proc)
        todo.extend(children.get(proc[0], []))
    return found


def alive(proc: tuple[int, str]) -> bool:
    """Whether the process still runs (one that exited and waits to be reaped does not)."""
    fields = stat(proc[0])
    return fields is not None and fields[19] == proc[1] and fields[0] not in ("Z", "X")


def stats() -> list[tuple[int, list[str]]]:
    """(pid, its /proc stat fields) for every process."""
    if not PROC.is_dir():
        return []
    out = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            fields = stat(int(entry.name))
            if fields is not None:
                out.append((int(entry.name), fields))
    return out


def stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, …,
    start time at index 19), or None when there is no such process."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()
