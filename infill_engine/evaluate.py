"""Infill evaluation (`dllm-infill eval-infill`): how good a model is at filling code holes.

Owns four measurements, each on data the builtin model never trained on:

* masked-token accuracy on held-out stdlib files at mask ratios 0.15 / 0.5 / 0.9 (one full pass,
  `Engine.logits`);
* exact match on single-line infills of held-out lines;
* HumanEval-SingleLineInfilling pass@1 (greedy), with a fixed span and with the oracle span (the
  true middle's token length), each program run in a sandbox: a subprocess of `python -I` with a
  scrubbed environment, a temporary working directory, resource limits and a timeout;
* mean tokens committed per forward pass at threshold 0.9 with the dual cache.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
HUMANEVAL = "benchmarks/humaneval-infilling/HumanEval-SingleLineInfilling.jsonl.gz"
DEFAULT_DATA = REPO_ROOT.parent / "shared" / HUMANEVAL
MASK_RATIOS = (0.15, 0.5, 0.9)


@dataclass
class PassStats:
    passed: int = 0
    total: int = 0
    tokens: int = 0
    forwards: int = 0
    ms: float = 0.0

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


# -- sandbox ----------------------------------------------------------------------------------
def _limits() -> None:  # runs in the child before exec
    import resource

    mem = 1 << 30
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CPU, (20, 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 22, 1 << 22))


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


def run_sandboxed(program: str, timeout: float = 10.0) -> bool:
    """True if `program` exits with status 0 within `timeout` seconds in an isolated child."""
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
                preexec_fn=_limits if os.name == "posix" else None,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == 0


# -- data -------------------------------------------------------------------------------------
def read_humaneval(path: Path, limit: int | None) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if limit is not None and limit < len(rows):
        stride = len(rows) / limit  # spread the subset over all 164 problems
        rows = [rows[int(i * stride)] for i in range(limit)]
    return rows


def heldout_texts(heldout_percent: int = 3) -> list[str]:
    from .corpus import split_corpus

    _, held = split_corpus(heldout_percent=heldout_percent)
    return [f.text for f in held]


def heldout_lines(texts: Sequence[str], n: int, seed: int) -> list[tuple[str, str, str]]:
    """(prefix, line, suffix) triples: a held-out non-blank code line with its file around it."""
    rng = random.Random(seed)
    out: list[tuple[str, str, str]] = []
    for _ in range(n * 50):
        if len(out) >= n:
            break
        text = rng.choice(list(texts))
        lines = text.splitlines(keepends=True)
        if len(lines) < 10:
            continue
        i = rng.randrange(5, len(lines) - 1)
        line = lines[i]
        body = line.strip()
        if len(body) < 4 or body.startswith("#") or not line.endswith("\n"):
            continue
        out.append(("".join(lines[:i]), line, "".join(lines[i + 1 :])))
    return out


# -- measurements -----------------------------------------------------------------------------
def masked_accuracy(
    engine: Any, texts: Sequence[str], ratio: float, windows: int, seq_len: int, seed: int
) -> float:
    gen = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    correct = total = 0
    for _ in range(windows):
        ids = engine.encode(rng.choice(list(texts)))
        if len(ids) < seq_len:
            continue
        start = rng.randrange(0, len(ids) - seq_len + 1)
        window = torch.tensor(ids[start : start + seq_len])[None]
        k = max(1, round(ratio * seq_len))
        pos = torch.randperm(seq_len, generator=gen)[:k]
        inp = window.clone()
        inp[0, pos] = engine.mask_id
        pred = engine.logits(inp)[0, pos].argmax(-1).cpu()
        correct += int((pred == window[0, pos]).sum())
        total += k
    return correct / total if total else 0.0


def _params(span: int) -> Any:
    from . import InfillParams

    return InfillParams(span=span, decode="threshold", threshold=0.9, cache="dual")


def line_exact_match(engine: Any, triples: Sequence[tuple[str, str, str]], span: int) -> float:
    hits = 0
    for prefix, line, suffix in triples:
        res = engine.infill(prefix, suffix, _params(span))
        hits += res.text.rstrip() == line.rstrip()
    return hits / len(triples) if triples else 0.0


def humaneval_pass(
    engine: Any, rows: Sequence[dict[str, Any]], span: int | None, timeout: float
) -> PassStats:
    """span None = oracle: the token length of the canonical middle."""
    stats = PassStats()
    for row in rows:
        n = span if span is not None else max(1, len(engine.encode(row["canonical_solution"])))
        res = engine.infill(row["prompt"], row["suffix"], _params(n))
        program = (
            row["prompt"] + res.text + row["suffix"] + "\n" + row["test"] + "\n"
            f"check({row['entry_point']})\n"
        )
        stats.passed += run_sandboxed(program, timeout)
        stats.total += 1
        stats.tokens += res.tokens
        stats.forwards += res.nfe_full + res.nfe_block
        stats.ms += res.elapsed_ms
    return stats


def evaluate(
    model: str,
    data: Path | None,
    limit: int | None,
    span: int,
    lines: int,
    windows: int,
    seq_len: int,
    seed: int,
    timeout: float,
) -> dict[str, Any]:
    from . import load

    torch.manual_seed(seed)
    t0 = time.monotonic()
    engine = load(model)
    texts = heldout_texts()
    report: dict[str, Any] = {"model": model, "seed": seed}
    report["masked_accuracy"] = {
        str(r): round(masked_accuracy(engine, texts, r, windows, seq_len, seed), 4)
        for r in MASK_RATIOS
    }
    triples = heldout_lines(texts, lines, seed)
    report["heldout_line_exact_match"] = round(line_exact_match(engine, triples, span), 4)
    report["heldout_lines"] = len(triples)
    path = data if data is not None else DEFAULT_DATA
    if path.is_file():
        rows = read_humaneval(path, limit)
        fixed = humaneval_pass(engine, rows, span, timeout)
        oracle = humaneval_pass(engine, rows, None, timeout)
        report["humaneval_single_line"] = {
            "problems": fixed.total,
            "span": span,
            "pass@1_fixed_span": round(fixed.rate, 4),
            "pass@1_oracle_span": round(oracle.rate, 4),
            "ms_per_infill": round(fixed.ms / max(fixed.total, 1), 1),
        }
        report["tokens_per_forward_tau0.9_dual"] = round(fixed.tokens / max(fixed.forwards, 1), 3)
    else:
        report["humaneval_single_line"] = None
        report["humaneval_missing"] = str(path)
    report["wall_seconds"] = round(time.monotonic() - t0, 1)
    return report


def format_table(report: dict[str, Any]) -> str:
    rows: list[tuple[str, str]] = []
    for r, acc in report["masked_accuracy"].items():
        rows.append((f"held-out masked-token accuracy @ {r}", f"{100 * acc:.1f}%"))
    rows.append(
        (
            f"held-out single-line exact match ({report['heldout_lines']} lines)",
            f"{100 * report['heldout_line_exact_match']:.1f}%",
        )
    )
    he = report.get("humaneval_single_line")
    if he:
        n = he["problems"]
        rows.append(
            (
                f"HumanEval single-line pass@1, span {he['span']} ({n})",
                f"{100 * he['pass@1_fixed_span']:.1f}%",
            )
        )
        rows.append(
            (
                f"HumanEval single-line pass@1, oracle span ({n})",
                f"{100 * he['pass@1_oracle_span']:.1f}%",
            )
        )
        rows.append(
            (
                "tokens per forward pass (τ=0.9, dual cache)",
                f"{report['tokens_per_forward_tau0.9_dual']:.2f}",
            )
        )
        rows.append(("ms per infill (fixed span)", f"{he['ms_per_infill']:.1f}"))
    else:
        rows.append(
            ("HumanEval single-line", f"skipped: {report.get('humaneval_missing')} not found")
        )
    width = max(len(k) for k, _ in rows)
    lines = [f"| {'metric'.ljust(width)} | value |", f"|{'-' * (width + 2)}|-------|"]
    lines += [f"| {k.ljust(width)} | {v} |" for k, v in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dllm-infill eval-infill", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--data", type=Path, default=None, help=f"default: ../shared/{HUMANEVAL}")
    ap.add_argument("--limit", type=int, default=100, help="HumanEval problems (0 = all)")
    ap.add_argument("--span", type=int, default=24, help="fixed span length in tokens")
    ap.add_argument("--lines", type=int, default=100, help="held-out single-line holes")
    ap.add_argument("--windows", type=int, default=64, help="held-out windows per mask ratio")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per sandboxed program")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    report = evaluate(
        a.model,
        a.data,
        a.limit or None,
        a.span,
        a.lines,
        a.windows,
        a.seq_len,
        a.seed,
        a.timeout,
    )
    print(json.dumps(report, indent=2) if a.json else format_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
