"""`dllm-infill`: fill, bench, train, eval-infill and eval-crossfile from the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from .cli_fill import QUANTIZE_HELP

if TYPE_CHECKING:
    from .service.listen import Address


def serve(argv: list[str]) -> int:
    """`dllm-infill serve`: one engine for many editors (docs/service.md)."""
    import asyncio
    import logging
    import signal

    from . import load
    from .cli_models import startup_check
    from .loader import locate
    from .model_names import HubName
    from .scheduler import MAX_BATCH, MAX_QUEUE
    from .service import (
        TOKEN_ENV,
        ServeError,
        Service,
        check_listen,
        parse_address,
        resolve_token,
    )
    from .service import (
        serve as serve_forever,
    )
    from .service.front import WEDGED_S

    ap = argparse.ArgumentParser(
        prog="dllm-infill serve",
        description="Serve infill requests: length-prefixed msgpack on a Unix socket or TCP, or "
        "HTTP (llama.cpp's /infill, OpenAI's /v1/completions, the native /v2/infill).",
    )
    ap.add_argument("--listen", required=True, help="unix:PATH, tcp:HOST:PORT or http://HOST:PORT")
    ap.add_argument(
        "--allow-remote", action="store_true", help="TCP/HTTP: bind a non-loopback host"
    )
    ap.add_argument(
        "--token-file", help=f"owner-only (0600) file with the token (default: ${TOKEN_ENV})"
    )
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--quantize", choices=("none", "int8", "int4"), default="none",
                    help=QUANTIZE_HELP)  # fmt: skip
    ap.add_argument("--qwen2-diffusion", action="store_true")
    ap.add_argument("--max-batch", type=int, default=MAX_BATCH, help="requests decoded together")
    ap.add_argument("--max-queue", type=int, default=MAX_QUEUE, help="requests waiting, at most")
    ap.add_argument("--log-level", default="INFO")
    ray = ap.add_argument_group("replicas on Ray Serve (the ray extra; docs/deploy.md)")
    ray.add_argument("--ray", action="store_true", help="serve HTTP from replicas on Ray Serve")
    ray.add_argument("--replicas", type=int, default=1, help="engines, each with its scheduler")
    ray.add_argument("--autoscale", metavar="MIN:MAX", help="replicas follow the load instead")
    ray.add_argument("--threads", type=int, default=1, help="torch CPU threads per replica")
    ray.add_argument(
        "--gpus-per-replica", type=float, help="default: 1 where the cluster has GPUs, else 0"
    )
    ray.add_argument("--ray-address", help="join this cluster (auto: `ray start` on this host)")
    ray.add_argument("--wedged-s", type=float, default=WEDGED_S, help="a longer step fails health")
    a = ap.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), format="dllm-infill serve: %(message)s")
    try:
        try:
            address = parse_address(a.listen)
        except ServeError as e:
            raise ServeError(f"--listen {e}") from None
        token = resolve_token(a.token_file)
        check_listen(address, token, a.allow_remote)  # before the model loads
        if a.ray:
            return _serve_ray(a, address, token)
        if a.max_batch < 1 or a.max_queue < 1:
            raise ServeError("--max-batch and --max-queue must be >= 1")
        # resolved once, so a folder that a Hub name shadows is said once, not by the check
        # and again by the load; a path is passed on as written (the load checks it again)
        where = locate(a.model)
        model = where if isinstance(where, HubName) else a.model
        fits = startup_check(  # before the weights load (fits.py)
            model, a.device, a.dtype, a.quantize, a.max_batch, a.qwen2_diffusion
        )
        print(f"dllm-infill serve: {fits}", file=sys.stderr, flush=True)
        engine = load(model, device=a.device, dtype=a.dtype,
                      qwen2_as_diffusion=a.qwen2_diffusion, quantize=a.quantize)  # fmt: skip
    except (ServeError, OSError, ValueError) as e:
        print(f"dllm-infill serve: {e}", file=sys.stderr)
        return 2
    engine.scheduler(max_queue=a.max_queue, max_batch=a.max_batch)  # the sizes, on first use
    service = Service(engine, str(a.model), token)

    def ready(bound: Address) -> None:
        print(
            f"dllm-infill serve: listening on {bound} (model {a.model})",
            file=sys.stderr,
            flush=True,
        )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve_forever(service, address, allow_remote=a.allow_remote, ready=ready, stop=stop)

    try:
        asyncio.run(main())
    except ServeError as e:
        print(f"dllm-infill serve: {e}", file=sys.stderr)
        return 2
    finally:
        service.shutdown()
    return 0


def _serve_ray(a: argparse.Namespace, address: Address, token: str | None) -> int:
    """`serve --ray`: the HTTP front on Ray Serve replicas (infill_engine/deploy); the address
    and the token are checked already."""
    from .deploy.spec import ReplicaSpec, Scaling
    from .service import ServeError

    def ready(bound: Address) -> None:
        print(f"dllm-infill serve: listening on {bound} (model {a.model}, Ray Serve)",
              file=sys.stderr, flush=True)  # fmt: skip

    try:
        if address.kind != "http":
            raise ServeError("--ray serves HTTP: --listen http://HOST:PORT")
        low, high = None, None
        if a.autoscale:
            low_text, _, high_text = a.autoscale.partition(":")
            if not (low_text.isdigit() and high_text.isdigit()):
                raise ServeError("--autoscale MIN:MAX, two numbers")
            low, high = int(low_text), int(high_text)
        spec = ReplicaSpec(
            model=str(a.model), device=a.device, dtype=a.dtype, qwen2_diffusion=a.qwen2_diffusion,
            quantize=a.quantize,
            max_batch=a.max_batch, max_queue=a.max_queue, threads=a.threads,
            gpus=a.gpus_per_replica, token=token, wedged_s=a.wedged_s,
        )  # fmt: skip
        scaling = Scaling(replicas=a.replicas, min_replicas=low, max_replicas=high)
        # A local cluster runs the replicas on this host, whose memory the check measures (per
        # replica); a cluster joined with --ray-address runs them on its own nodes.
        if a.ray_address is None:
            from .cli_models import startup_check

            try:  # before Ray starts and any replica loads (fits.py)
                fits = startup_check(
                    a.model, a.device, a.dtype, a.quantize, a.max_batch, a.qwen2_diffusion
                )
            except ValueError as e:  # it does not fit, or the model cannot be named
                raise ServeError(str(e)) from None
            print(f"dllm-infill serve: each replica: {fits}", file=sys.stderr, flush=True)
        else:
            print("dllm-infill serve: no memory check here, the replicas run on the cluster's "
                  "nodes (`dllm-infill check` on one of them)", file=sys.stderr)  # fmt: skip
        try:
            from .deploy.launch import serve_ray
        except ImportError as e:
            raise ServeError(f"--ray needs Ray: pip install -e '.[ray]' ({e})") from None
        serve_ray(spec, scaling, address, a.ray_address, ready)
    except (ServeError, OSError) as e:
        print(f"dllm-infill serve: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # Ray Serve's deployment failed (a replica could not start)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"dllm-infill serve: the deployment failed: {first}", file=sys.stderr)
        return 1
    return 0


# One line each for `dllm-infill --help`, without importing the modules (torch) behind them.
COMMANDS = {
    "fill": "fill the hole at a line and column of a file, and print the completion",
    "bench": "NFE and wall time of the decode and cache combinations against the baseline",
    "bench-lsp": "what the language server adds on top of the engine",
    "serve": "one engine for many editors: msgpack on a Unix socket or TCP, or HTTP",
    "bench-serve": "1, 4 and 16 clients against one engine: batching against one at a time",
    "bench-ray": "replicas on a local Ray Serve cluster: scale, a killed replica, a wedged one",
    "models": "checkpoints of supported families in the Hugging Face cache, with sizes",
    "check": "does a model fit: weights, cache per row, the largest batch (config.json only)",
    "train": "train a stage of the builtin code model into a new model directory",
    "eval-infill": "held-out accuracy against baselines, HumanEval-Infilling pass@1",
    "eval-crossfile": "holes that need another file, filled with and without its context",
}
ORDER = ("fill", "bench", "bench-lsp", "serve", "bench-serve", "bench-ray", "models", "check",
         "train", "eval-infill", "eval-crossfile")  # fmt: skip

# The commands the lab runs (lab/, the dllm-infill-lab distribution, package dllm_lab): each
# one's module there, whose `main(argv)` it is. None of it ships in the runtime wheel.
LAB = {
    "bench": "bench",
    "bench-lsp": "bench_lsp",
    "bench-serve": "bench_serve",
    "bench-ray": "bench_ray",
    "train": "train",
    "eval-infill": "evaluate",
    "eval-crossfile": "eval_crossfile",
}


def lab(cmd: str, argv: list[str]) -> int:
    """Run a lab command: its module in dllm_lab, imported only now (torch, the lab's own
    dependencies); one line and exit status 2 where the lab is not installed."""
    import importlib

    try:
        import dllm_lab  # noqa: F401
    except ModuleNotFoundError as e:
        if e.name != "dllm_lab":  # the lab is there; something it imports is not
            raise
        print(
            f"dllm-infill {cmd}: the lab is a separate distribution (dllm-infill-lab): "
            "pip install -e lab/ from a checkout",
            file=sys.stderr,
        )
        return 2
    run: Callable[[list[str]], int] = importlib.import_module(f"dllm_lab.{LAB[cmd]}").main
    return run(argv)


def usage() -> str:
    """`dllm-infill --help`: every subcommand with what it does."""
    rows = [(name, COMMANDS[name]) for name in ORDER]
    width = max(len(name) for name, _ in rows)
    lines = [
        "usage: dllm-infill COMMAND [options]   (dllm-infill COMMAND --help for its options)",
        "",
        "Code infill with diffusion language models.",
        "",
        "commands:",
        *(f"  {name.ljust(width)}  {line}".rstrip() for name, line in rows),
        "",
        "bench*, train and eval-*: the lab, a distribution of its own (pip install -e lab/)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(usage())
        return 0
    if not argv:
        print(usage(), file=sys.stderr)
        return 2
    if argv[0] not in COMMANDS:
        known = ", ".join(ORDER)
        print(f"dllm-infill: unknown command {argv[0]!r}; one of {known}", file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "fill":
        from .cli_fill import fill

        return fill(rest)
    if cmd == "serve":
        return serve(rest)
    if cmd in ("models", "check"):
        from . import cli_models

        return cli_models.models(rest) if cmd == "models" else cli_models.check(rest)
    return lab(cmd, rest)


if __name__ == "__main__":
    raise SystemExit(main())
