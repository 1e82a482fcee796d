"""`dllm-infill-ls`: the language server's command line. Stdio by default; `--tcp HOST:PORT`
binds to loopback only (unless `--allow-remote`) and always requires a token. Both read frames
with transport.py's resynchronising reader, not pygls' own.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys

from infill_engine.service.listen import is_loopback, split_host_port

from .protocol.handlers import VERSION, build_server
from .protocol.tcp import serve_tcp
from .protocol.telemetry import stats_main
from .protocol.transport import serve_stdio


def _host_port(value: str) -> tuple[str, int]:
    hostport = split_host_port(value)
    if hostport is None:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    host, port = hostport
    return host or "127.0.0.1", port


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["stats"]:  # the completion counts kept on this machine (telemetry.py)
        return stats_main(args[1:])
    ap = argparse.ArgumentParser(
        prog="dllm-infill-ls",
        description="Language server for diffusion-LM code infill.",
        epilog="other command: dllm-infill-ls stats [--json] [--file PATH] prints the "
        "completions shown and accepted per language, as counted on this machine "
        "(dllm-infill-ls stats --help)",
    )
    ap.add_argument("--stdio", action="store_true", help="serve on stdio (the default)")
    ap.add_argument("--tcp", type=_host_port, metavar="HOST:PORT", help="serve on TCP")
    ap.add_argument("--token", help="TCP: the secret clients send (default: $DLLM_LS_TOKEN)")
    ap.add_argument("--allow-remote", action="store_true", help="TCP: allow a non-loopback host")
    # WARNING: editors show stderr in their logs, and pygls logs every message at INFO
    ap.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    ap.add_argument("--version", action="version", version=f"dllm-infill-ls {VERSION}")
    a = ap.parse_args(argv)
    # stdout carries the protocol in stdio mode: every log line goes to stderr.
    logging.basicConfig(level=a.log_level, stream=sys.stderr, format="%(levelname)s %(message)s")
    # pygls logs every message in full (document text included) at INFO: only DEBUG shows it.
    if a.log_level != "DEBUG":
        logging.getLogger("pygls").setLevel(max(logging.WARNING, logging.getLevelName(a.log_level)))
    if a.tcp is None:
        serve_stdio(build_server())
        return 0
    host, port = a.tcp
    if not is_loopback(host) and not a.allow_remote:
        ap.error(f"{host} is not a loopback address; pass --allow-remote to bind it anyway")
    token = a.token or os.environ.get("DLLM_LS_TOKEN")
    if not token:
        token = secrets.token_urlsafe(16)
        print(f"dllm-infill-ls: token {token}", file=sys.stderr, flush=True)
    serve_tcp(build_server, host, port, token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
