"""The evaluation sandbox: generated code runs only here.

A program runs in a child `python -I -B` with a scrubbed environment, a temporary working
directory, memory/CPU/file-size limits, a timeout, and sockets disabled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

MEMORY_BYTES = 1 << 30
CPU_SECONDS = 20
FILE_BYTES = 1 << 22


def _limits(cpu_seconds: int) -> None:  # runs in the child before exec
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))


# Prepended to every program: generated code gets no sockets (HumanEval needs none). The child
# is also isolated from the user's site, environment, proxies and files (-I, a scratch cwd).
NO_NETWORK = (
    "import socket as _socket\n"
    "def _no_network(*args, **kwargs):\n"
    "    raise OSError('network access is disabled in the evaluation sandbox')\n"
    "_socket.socket = _socket.create_connection = _socket.getaddrinfo = _no_network\n"
    "_socket.socketpair = _socket.fromfd = _no_network\n"
    "del _socket, _no_network\n"
)


def run_sandboxed(program: str, timeout: float = 10.0, cpu_seconds: int = CPU_SECONDS) -> bool:
    """True if `program` exits with status 0 within `timeout` wall seconds and `cpu_seconds` of
    CPU in an isolated child."""
    with tempfile.TemporaryDirectory(prefix="dllm-eval-") as tmp:
        file = Path(tmp) / "program.py"
        file.write_text(NO_NETWORK + program)
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "PYTHONHASHSEED": "0"}
        env.update({k: "" for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")})
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-B", str(file)],
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout,
                preexec_fn=partial(_limits, cpu_seconds) if os.name == "posix" else None,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == 0
