"""A process's memory as Linux reports it, for the tests that bound a server's growth."""

from __future__ import annotations

from pathlib import Path


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """`field` of /proc/PID/status (VmRSS: resident now; VmHWM: its peak), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field}")
