"""`dllm-infill bench-lsp`: what the language server adds on top of the engine.

A real LSP client (pygls) starts `dllm-infill-ls` over stdio, opens a sample file and sends N
invoked inline-completion requests at different cursors. For each it records the round trip
and the engine's own time for that request (the wall time of the engine call on the server's
worker thread, tokenization included, from `dllm/status`, read outside the timed part),
then prints p50/p95 of both and of their difference: the server's overhead (JSON-RPC, context
building with the tokenizer, post-processing, syntax checks). A second pass re-asks at the same
cursors after typing one character, to time the typed-ahead cache, which never calls the model.
A third pass sends automatic requests where a user starts a line (the line's text removed):
their round trips, how many showed an item and the model calls they cost.
With `--workspace FOLDER` it runs twice, side by side: with no workspace, then with FOLDER as the
workspace (its index built first: the seconds and the server's resident memory it took are
reported), and prints the ratio of the two round trips' p50 (docs/robustness.md).

The server it starts keeps its acceptance counts in a temporary state directory, removed at the
end: a benchmark's requests are not the user's completions (telemetry.py). A figure with no
samples (no request typed ahead) is null in `--json` and "-" in the table.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bench_sample.py"


def plain(value: Any) -> Any:
    """pygls hands untyped results over as namedtuples: back to dicts (and lists of them)."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, round(q * (len(s) - 1)))], 2)


def cursors(text: str, n: int) -> list[tuple[int, int]]:
    """n cursors at the ends of non-blank lines, spread over the file."""
    lines = text.split("\n")
    ends = [(i, len(line)) for i, line in enumerate(lines) if line.strip()]
    return [ends[(k * 7919) % len(ends)] for k in range(n)]


async def run(
    n: int,
    sample: Path,
    settings: dict[str, Any],
    server: list[str],
    env: dict[str, str] | None = None,
    folder: Path | None = None,
) -> dict[str, Any]:
    client = LanguageClient("dllm-bench-lsp", "0")
    logs: list[str] = []

    @client.feature(lsp.WINDOW_LOG_MESSAGE)
    def _log(params: lsp.LogMessageParams) -> None:
        logs.append(params.message)

    @client.feature(lsp.WINDOW_SHOW_MESSAGE)
    def _show(params: lsp.ShowMessageParams) -> None:
        print(f"bench-lsp: server says: {params.message}", file=sys.stderr)

    await client.start_io(*server, env=env)
    caps = lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=False))
    folders = [lsp.WorkspaceFolder(folder.resolve().as_uri(), folder.name)] if folder else None
    await client.initialize_async(
        lsp.InitializeParams(
            capabilities=caps, initialization_options=settings, workspace_folders=folders
        )
    )
    client.initialized(lsp.InitializedParams())
    pid = client._server.pid if client._server is not None else None

    async def status() -> dict[str, Any]:
        return dict(plain(await client.protocol.send_request_async("dllm/status", None)))

    t_load = time.perf_counter()
    while (s := await status())["state"] not in ("ready", "failed"):
        await asyncio.sleep(0.05)
    if s["state"] == "failed":
        raise RuntimeError(f"the model failed to load: {s['error']}")
    load_s = time.perf_counter() - t_load
    index: dict[str, Any] | None = None
    if folder is not None:
        rss_before = _rss_mib(pid)
        while not ((ws := (await status())["drafts"]["workspace"]) or {}).get("ready"):
            await asyncio.sleep(0.1)
        index = {**ws, "rss_mib_added": round(_rss_mib(pid) - rss_before, 1)}
    text = sample.read_text()
    uri = sample.resolve().as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )

    def params(line: int, char: int) -> lsp.InlineCompletionParams:
        return lsp.InlineCompletionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=line, character=char),
            context=lsp.InlineCompletionContext(
                trigger_kind=lsp.InlineCompletionTriggerKind.Invoked
            ),
        )

    # One warm-up request: the first pass pays for allocator and kernel warm-up.
    await client.text_document_inline_completion_async(params(*cursors(text, 1)[0]))
    rtt, engine, overhead, cached = [], [], [], []
    version = 1
    for line, char in cursors(text, n):
        calls = (await status())["model_calls"]
        t0 = time.perf_counter()
        result = await client.text_document_inline_completion_async(params(line, char))
        ms = (time.perf_counter() - t0) * 1000
        s = await status()
        if s["model_calls"] != calls + 1:
            continue  # answered without the model: not a model round trip
        rtt.append(ms)
        engine.append(float(s["last"]["call_ms"]))
        overhead.append(ms - engine[-1])
        items = result.items if isinstance(result, lsp.InlineCompletionList) else result or []
        first = items[0].insert_text if items else ""
        if isinstance(first, str) and first[:1].strip():
            # Type the completion's first character and ask again: the cache answers.
            lines = text.split("\n")
            lines[line] = lines[line][:char] + first[0] + lines[line][char:]
            version += 1
            client.text_document_did_change(
                lsp.DidChangeTextDocumentParams(
                    text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[
                        lsp.TextDocumentContentChangeWholeDocument(text="\n".join(lines))
                    ],
                )
            )
            hits = (await status())["typeahead_hits"]
            t0 = time.perf_counter()
            await client.text_document_inline_completion_async(params(line, char + 1))
            ms = (time.perf_counter() - t0) * 1000
            if (await status())["typeahead_hits"] == hits + 1:
                cached.append(ms)  # only true cache answers count here
            version += 1  # put the text back for the next cursor
            client.text_document_did_change(
                lsp.DidChangeTextDocumentParams(
                    text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
                )
            )
    automatic = await _automatic(client, status, uri, text, n)
    final = await status()
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()

    def summary(values: list[float]) -> dict[str, float | None]:
        return {
            "p50": _pct(values, 0.5),
            "p95": _pct(values, 0.95),
            "mean": round(statistics.fmean(values), 2) if values else None,
        }

    return {
        "requests": len(rtt),
        "model": final["model"],
        "device": final["device"],
        "load_s": round(load_s, 2),
        "round_trip_ms": summary(rtt),
        "engine_ms": summary(engine),
        "overhead_ms": summary(overhead),
        "typeahead_ms": summary(cached),
        "typeahead_hits": final["typeahead_hits"],
        "automatic": automatic,
        "index": index,
    }


async def _automatic(
    client: LanguageClient, status: Any, uri: str, text: str, n: int
) -> dict[str, Any]:
    """N automatic requests where a user starts a line: the line's text removed, the cursor
    after its indentation, then put back, each as the ranged change an editor sends. Their
    round trips (debounce 0), how many showed an item and how many model passes they cost
    (with the builtin model, an automatic request shows only a gated draft:
    decide.Policy.model_shown)."""
    lines = text.split("\n")
    rtt: list[float] = []
    shown: list[float] = []
    calls = (await status())["model_calls"]
    version = 1000

    def edit(row: int, start: int, end: int, new: str) -> None:
        nonlocal version
        version += 1
        span = lsp.Range(lsp.Position(row, start), lsp.Position(row, end))
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[lsp.TextDocumentContentChangePartial(range=span, text=new)],
            )
        )

    for row, _ in cursors(text, n):
        line = lines[row]
        indent = line[: len(line) - len(line.lstrip())]
        at = _utf16(indent)  # the client's positions count UTF-16 units
        edit(row, at, _utf16(line), "")
        ask = lsp.InlineCompletionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=row, character=at),
            context=lsp.InlineCompletionContext(
                trigger_kind=lsp.InlineCompletionTriggerKind.Automatic
            ),
        )
        t0 = time.perf_counter()
        result = await client.text_document_inline_completion_async(ask)
        ms = (time.perf_counter() - t0) * 1000
        rtt.append(ms)
        items = result.items if isinstance(result, lsp.InlineCompletionList) else result or []
        if items:
            shown.append(ms)
        edit(row, at, at, line[len(indent) :])  # the line put back
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if not any(d["sha256"] == digest for d in (await status())["documents"]):
        raise RuntimeError("bench-lsp: the server's text is not the sample's after its edits")
    return {
        "requests": len(rtt),
        "shown": len(shown),
        "model_calls": (await status())["model_calls"] - calls,
        "round_trip_ms": {"p50": _pct(rtt, 0.5), "p95": _pct(rtt, 0.95)},
        "shown_round_trip_ms": {"p50": _pct(shown, 0.5), "p95": _pct(shown, 0.95)},
    }


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _rss_mib(pid: int | None) -> float:
    """The resident memory of the server's process (Linux), in MiB; 0 where unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dllm-infill bench-lsp", description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--requests", type=int, default=40)
    ap.add_argument("--sample", type=Path, default=SAMPLE)
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--workspace", type=Path, help="also run with this folder as the workspace")
    a = ap.parse_args(argv)
    if a.requests < 0:
        ap.error(f"--requests must be >= 0, got {a.requests}")
    settings = {"model": a.model, "device": a.device, "debounceMs": 0, "candidates": 1}
    server = [sys.executable, "-m", "lsp_server", "--log-level", "WARNING"]
    try:
        with tempfile.TemporaryDirectory(prefix="dllm-bench-lsp-") as state:
            env = {**os.environ, "XDG_STATE_HOME": state}  # not the user's acceptance counts
            out = asyncio.run(run(a.requests, a.sample, settings, server, env))
            if a.workspace is not None:
                out["with_workspace"] = asyncio.run(
                    run(a.requests, a.sample, settings, server, env, a.workspace)
                )
        out["full_pass_ms"] = full_pass_ms(a.model, a.device)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"bench-lsp: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(out, allow_nan=False))
        return 0
    print(f"bench-lsp: {out['requests']} requests, {out['model']} on {out['device']}")
    print(f"{'':14}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}")
    for key, label in (
        ("round_trip_ms", "round trip"),
        ("engine_ms", "engine"),
        ("overhead_ms", "server adds"),
        ("typeahead_ms", "typed ahead"),
    ):
        cells = (
            "-" if out[key][k] is None else f"{out[key][k]:.2f}" for k in ("p50", "p95", "mean")
        )
        print(f"{label:14}" + "".join(f"{c:>10}" for c in cells))
    auto = out["automatic"]
    print(
        f"automatic     {auto['round_trip_ms']['p50']}  p95 {auto['round_trip_ms']['p95']} ms "
        f"(debounce 0), {auto['shown']} of {auto['requests']} showed an item "
        f"(p50 {auto['shown_round_trip_ms']['p50']} ms), {auto['model_calls']} model calls"
    )
    full, p50 = out["full_pass_ms"], out["round_trip_ms"]["p50"]
    ratio = f" (round trip p50 = {p50 / full:.1f} x)" if p50 is not None and full else ""
    print(f"{'one full pass':14}{full:>10.2f}  at the model's positions, in this run{ratio}")
    if (ws := out.get("with_workspace")) is not None:
        ix, p50_ws = ws["index"], ws["round_trip_ms"]["p50"]
        print(
            f"with the workspace {a.workspace}: {ix['files']} files, {ix['lines']} lines indexed "
            f"in {ix['build_s']:.1f} s, +{ix['rss_mib_added']:.0f} MiB resident; round trip p50 "
            f"{p50_ws:.2f} ms = {p50_ws / p50:.2f} x without"
            if p50_ws is not None and p50
            else f"with the workspace: {ws}"
        )
    return 0


def full_pass_ms(model: str, device: str, repeats: int = 10) -> float:
    """The median time of one full pass over a canvas of the model's positions, the unit the
    round trip is compared with: loaded in this process, after the server has gone."""
    import torch

    from infill_engine import load

    engine = load(model, device=device)
    ids = torch.randint(0, engine.args.vocab_size, (1, engine.args.max_positions))
    times = []
    for _ in range(repeats + 2):  # two untimed
        t0 = time.perf_counter()
        engine.logits(ids)
        times.append((time.perf_counter() - t0) * 1000)
    engine.close()
    return round(statistics.median(times[2:]), 2)
