"""Drafts on and off through the language server, on a repository of your choice.

    python -m dllm_lab.eval_drafts REPO [REPO ...] [--holes 100] [--json OUT]

For each repository: single-line holes are cut from its source files (tests left out), half a
whole statement removed (the cursor on the blank line at its indentation), half a line cut
after a word (lab/holes.py: `statement`, `line`). A real language server (`dllm-infill-ls`,
the builtin model unless `--model`) is started with the repository as its workspace folder,
so its workspace index reads the repository from disk, where the holed file still has the
true line: the index never drafts from a document's own disk copy, and this is what checks
it. Each hole's document is opened whole, as its buffer, and asked for an inline completion,
automatic and then invoked, once with drafts on (the default settings) and once off.

Printed per repository and mode: exact match of the first invoked item (its text equals the
missing text, whitespace stripped), the share of holes where an automatic trigger shows
anything and the share of what it shows that is exact, and the p50 latency of an invoked
request. The gate's curve (coverage against precision) comes from the drafts' scores.
`--json` writes the same figures and, per repository and mode, each hole's answers (its file,
offset and missing text, the automatic and the invoked first item), so that two runs on the
same holes can be compared hole by hole.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from .bench_lsp import plain
from .holes import Hole, draw, source_files

KINDS = ("statement", "line")


def repo_holes(
    root: Path,
    n: int,
    seed: int,
    only: Callable[[Path], bool] | None = None,
    kinds: Sequence[str] = KINDS,
    language: str = "python",
) -> list[tuple[Path, Hole]]:
    """n holes from the repository's files of `language` (those `only` keeps; not tests, docs
    nor hidden: holes.source_files), as many of each kind (single lines unless `kinds` says
    otherwise: lab/holes.py), no hole twice."""
    found = source_files(root, language)
    files = [(p, t) for p, t in found.items() if not only or only(p)]
    rng = random.Random(seed)
    return [h for kind in kinds for h in draw(files, language, kind, rng, n // len(kinds))]


async def _client(root: Path, settings: dict[str, Any], server: Sequence[str]) -> LanguageClient:
    client = LanguageClient("dllm-eval-drafts", "0")
    await client.start_io(*server)
    caps = lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=False))
    folder = lsp.WorkspaceFolder(uri=root.resolve().as_uri(), name=root.name)
    await client.initialize_async(
        lsp.InitializeParams(
            capabilities=caps,
            initialization_options={"debounceMs": 0, **settings},
            workspace_folders=[folder],
            root_uri=folder.uri,
        )
    )
    client.initialized(lsp.InitializedParams())
    return client


async def _status(client: LanguageClient) -> dict[str, Any]:
    return dict(plain(await client.protocol.send_request_async("dllm/status", None)))


def _first(result: Any) -> str | None:
    items = result.items if isinstance(result, lsp.InlineCompletionList) else result or []
    if not items:
        return None
    text = items[0].insert_text
    return text if isinstance(text, str) else text.value


@dataclass(frozen=True)
class Answer:
    automatic: str | None  # the first item of an automatic trigger (None: nothing shown)
    invoked: str | None  # the first item of an invoked request
    invoked_ms: float


async def ask_all(
    root: Path, cases: list[tuple[Path, Hole]], drafts: bool, server: Sequence[str], model: str
) -> tuple[list[Answer], dict[str, Any]]:
    """Each hole's document opened whole in a language server whose workspace is `root`, asked
    automatic and then invoked, the document opened afresh for each (the server keeps a
    request's items for typing ahead until the document closes); the answers, and the server's
    drafts status at the end."""
    settings: dict[str, Any] = {
        "model": model,
        "drafts": {"enabled": drafts},
        "stats": {"enabled": False},
    }
    client = await _client(root, settings, server)
    try:
        for _ in range(600):  # the model loads and the index builds
            s = await _status(client)
            ws = (s.get("drafts") or {}).get("workspace")
            if s.get("state") in ("ready", "failed") and (not drafts or ws):
                break
            await asyncio.sleep(0.1)
        answers = []
        for path, hole in cases:
            uri = path.resolve().as_uri()
            line = hole.text.count("\n", 0, hole.offset)
            col = hole.offset - (hole.text.rfind("\n", 0, hole.offset) + 1)
            got: list[str | None] = []
            for kind in (lsp.InlineCompletionTriggerKind.Automatic,
                         lsp.InlineCompletionTriggerKind.Invoked):  # fmt: skip
                # opened afresh for each: closing forgets the items kept for typing ahead
                doc = lsp.TextDocumentItem(
                    uri=uri, language_id=hole.language_id, version=1, text=hole.text
                )
                client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=doc))
                params = lsp.InlineCompletionParams(
                    text_document=lsp.TextDocumentIdentifier(uri=uri),
                    position=lsp.Position(line=line, character=col),  # ASCII sources
                    context=lsp.InlineCompletionContext(trigger_kind=kind),
                )
                t0 = time.perf_counter()
                got.append(_first(await client.text_document_inline_completion_async(params)))
                ms = (time.perf_counter() - t0) * 1000
                close = lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri))
                client.text_document_did_close(close)
            answers.append(Answer(got[0], got[1], ms))
        return answers, (await _status(client)).get("drafts") or {}
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


async def run_mode(
    root: Path, cases: list[tuple[Path, Hole]], drafts: bool, server: Sequence[str], model: str
) -> dict[str, Any]:
    answers, status = await ask_all(root, cases, drafts, server, model)
    truths = [hole.middle.strip() for _, hole in cases]
    pairs = list(zip(answers, truths, strict=True))
    exact = sum(a.invoked is not None and a.invoked.strip() == t for a, t in pairs)
    shown = [(a.automatic, t) for a, t in pairs if a.automatic is not None]
    right = sum(text.strip() == t for text, t in shown)
    return {
        **rates({"holes": len(cases), "exact": exact, "shown": len(shown), "right": right}),
        "invoked_p50_ms": statistics.median(a.invoked_ms for a in answers) if answers else None,
        "sources": status.get("shown"),
        "workspace": status.get("workspace"),
        "answers": [  # hole by hole, so that two runs can be compared where they differ
            {
                "file": str(path.relative_to(root)) if path.is_relative_to(root) else str(path),
                "offset": hole.offset,
                "truth": truth,
                "automatic": a.automatic,
                "invoked": a.invoked,
            }
            for (path, hole), a, truth in zip(cases, answers, truths, strict=True)
        ],
    }


def rates(counts: dict[str, int]) -> dict[str, Any]:
    """The counts (holes, exact invoked, automatic shown and right among them) and their
    shares."""
    n, shown = counts["holes"], counts["shown"]
    return {
        **counts,
        "invoked_exact": counts["exact"] / n if n else 0.0,
        "automatic_shown": shown / n if n else 0.0,
        "automatic_precision": counts["right"] / shown if shown else None,
    }


def _row(mode: str, r: dict[str, Any]) -> str:
    keys = ("invoked_exact", "automatic_shown", "automatic_precision")
    cells = [_pct(r[k]) for k in keys]
    ms = f"{r['invoked_p50_ms']:>8.0f}" if r.get("invoked_p50_ms") is not None else f"{'':>8}"
    return f"  {mode:<7} {cells[0]:>14} {cells[1]:>11} {cells[2]:>11} {ms}"


_HEADER = (
    f"  {'drafts':<7} {'invoked exact':>14} {'auto shown':>11} {'auto exact':>11} {'p50 ms':>8}"
)


def humaneval(model: str, limit: int | None) -> dict[str, float]:
    """HumanEval-Infilling single-line, no workspace: pass@1 of what an invoked request shows,
    the model's fill finished as the editor does, with the problem's own drafts ranked with it
    and without."""
    from infill_engine import InfillParams, load, planner
    from infill_engine.decide import Policy, Seen, decide, trusted
    from infill_engine.drafts import gather

    from .humaneval import DEFAULT_DATA, read_humaneval
    from .sandbox import run_sandboxed

    engine = load(model, device="cpu")
    rows = read_humaneval(DEFAULT_DATA, limit)
    passed = {"off": 0, "on": 0}
    for row in rows:
        prefix, suffix = row["prompt"], row["suffix"]
        text = prefix + suffix
        plan = planner.plan(text, len(prefix), "python", engine.encode,
                            max_positions=engine.args.max_positions)  # fmt: skip
        params = InfillParams(span="auto", max_span=max(128, plan.max_span))
        raw = engine.infill(prefix, suffix, params, plan=plan).text
        seen = Seen.whole(text, len(prefix), "python", plan.kind)
        alone = decide([raw], [], seen, Policy(automatic=False, trust_model=True))
        fill = alone[0].text if alone else ""
        asked = Policy(automatic=False, trust_model=trusted(model))
        best = decide([raw], gather(text, len(prefix)), seen, asked)
        for mode, text in (("off", fill), ("on", best[0].text if best else "")):
            program = f"{prefix}{text}{suffix}\n{row['test']}\ncheck({row['entry_point']})\n"
            passed[mode] += run_sandboxed(program, 10.0)
    return {mode: n / len(rows) for mode, n in passed.items()}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dllm_lab.eval_drafts",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("repos", nargs="*", type=Path, help="repository folders")
    ap.add_argument("--language", default="python", help="the languageId of the holes")
    ap.add_argument("--holes", type=int, default=100, help="holes per repository")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--kinds", default=",".join(KINDS), help="hole kinds, comma-separated (lab/holes.py)"
    )
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument(
        "--humaneval", type=int, metavar="N", default=0, help="also HumanEval single-line, N rows"
    )
    a = ap.parse_args(argv)
    server = [str(Path(sys.executable).parent / "dllm-infill-ls")]
    report: dict[str, Any] = {}
    for root in a.repos:
        if not root.is_dir():
            print(f"eval-drafts: {root} is not a folder", file=sys.stderr)
            return 2
        cases = repo_holes(root, a.holes, a.seed, kinds=a.kinds.split(","), language=a.language)
        report[root.name] = {
            mode: asyncio.run(run_mode(root, cases, mode == "on", server, a.model))
            for mode in ("off", "on")
        }
        print(f"{root.name} ({len(cases)} {a.language} holes)")
        print(_HEADER)
        for mode, r in report[root.name].items():
            print(_row(mode, r))
        sys.stdout.flush()
    if len(a.repos) > 1:
        keys = ("holes", "exact", "shown", "right")
        pooled = {
            mode: rates({k: sum(r[mode][k] for r in report.values()) for k in keys})
            for mode in ("off", "on")
        }
        report["all"] = pooled
        print(f"all ({pooled['on']['holes']} {a.language} holes)")
        print(_HEADER)
        for mode, r in pooled.items():
            print(_row(mode, r))
    if a.humaneval:
        he = humaneval(a.model, a.humaneval)
        report["humaneval-single-line"] = he
        print(f"HumanEval-Infilling single-line ({a.humaneval} problems): pass@1 drafts off "
              f"{_pct(he['off'])}, on {_pct(he['on'])}")  # fmt: skip
    if a.json is not None:
        a.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
