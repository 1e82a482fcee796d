"""Retrieved snippets as context (RepoCoder's way) against drafts as completions, on a
repository of your choice.

    python -m dllm_lab.eval_retrieved REPO [REPO ...] [--holes 100] [--lines 8]

Drafts (drafts/) can serve a hole two ways: shown as the completion themselves (ranked and
gated, docs/drafts.md), or placed before the prefix as retrieved context so that the model
copies from them, as RepoCoder does for an autoregressive model. This measures the second
against the first on the same holes.

Single-line holes are cut from each repository's non-test Python files (eval_drafts'
`repo_holes`); each hole's drafts are found as a language server serves them (the document's,
and the repository's other files' as its workspace index finds them). Then the model fills each
hole three ways, each prepared as the service prepares a call (hole.prepare): with no other
file's chunks; with the code around the best drafts' occurrences (`--lines` either side of
each, the best `--snippets` of them) as chunks before the prefix; and, as a control, with the
same number of chunks taken from the same files' random places. Printed per repository: how
often the model's fill (finished as an editor finishes it) is the missing line in each way,
and how often the first draft is.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

from infill_engine.drafts import Draft
from infill_engine.drafts.lines import LineIndex

from .eval_drafts import repo_holes

WAYS = ("none", "retrieved", "random")


def _workspace(root: Path) -> dict[Path, LineIndex]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        if any(part.startswith(".") for part in p.relative_to(root).parts):
            continue
        try:
            out[p.resolve()] = LineIndex.build(str(p.resolve()), "workspace", p.read_text("utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return out


def _snippet(index: LineIndex, row: int, lines: int) -> str:
    return "\n".join(index.lines[max(0, row - lines) : row + lines + 1])


def snippets(
    found: list[Draft],
    files: dict[Path, LineIndex],
    document: LineIndex,
    n: int,
    lines: int,
    rng: random.Random,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The code around the best `n` drafts' occurrences, as (path, text) chunks, the best last
    (the chunks' order: the most relevant nearest the prefix); and as many chunks of `lines * 2
    + 1` lines from random places of the same files."""
    near, far = [], []
    for d in found[:n]:
        # drafts.lines names an occurrence "path:line", or "line N" in the document itself
        path, _, line = d.where.rpartition(":")
        if d.where.startswith("line "):
            path, line = "", d.where.removeprefix("line ")
        index = files.get(Path(path)) if path else document
        if index is None or not line.isdigit():
            continue
        row = int(line) - 1
        name = path or "this file"
        near.append((name, _snippet(index, row, lines)))
        far.append((name, _snippet(index, rng.randrange(len(index.lines)), lines)))
    return near[::-1], far[::-1]


def evaluate(engine: Any, root: Path, n: int, seed: int, top: int, lines: int) -> dict[str, Any]:
    from infill_engine import drafts
    from infill_engine.decide import Seen, finished
    from infill_engine.drafts.lines import Cursor, candidates
    from infill_engine.finish import finish
    from infill_engine.finish.syntax import Around
    from infill_engine.hole import Hole, prepare
    from infill_engine.params import InfillParams

    files = _workspace(root)
    rng = random.Random(seed)
    right = dict.fromkeys((*WAYS, "draft"), 0)
    with_snippets = 0
    cases = repo_holes(root, n, seed)
    for path, case in cases:
        prefix, suffix, truth = case.prefix, case.suffix, case.middle.strip()
        others = [ix for p, ix in files.items() if p != path.resolve()]
        around = Around(prefix, suffix)
        carried = candidates(Cursor.at(case.text, case.offset), others)
        found = drafts.gather(case.text, case.offset, carried=carried)
        found = finished(found, Seen(around, prefix, suffix, "python"))
        right["draft"] += bool(found) and found[0].text.strip() == truth
        near, far = snippets(found, files, drafts.document_index(case.text, case.offset),
                             top, lines, rng)  # fmt: skip
        with_snippets += bool(near)
        for way, extra in (("none", []), ("retrieved", near), ("random", far)):
            ask = Hole(case.text, case.offset, language_id="python", priority="invoked",
                       params=InfillParams(), extra=tuple(extra), extra_tokens=384,
                       drafting=False)  # fmt: skip
            request = prepare(engine, ask).requests[0]
            raw = engine.run([request])[0].text
            fill = finish(raw, prefix, suffix, "python", document=around) or ""
            right[way] += fill.strip() == truth
    k = max(len(cases), 1)
    return {"holes": len(cases), "with_snippets": with_snippets,
            **{f"exact_{w}": v / k for w, v in right.items()}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dllm_lab.eval_retrieved",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("repos", nargs="+", type=Path, help="repository checkouts")
    ap.add_argument("--holes", type=int, default=100, help="holes per repository")
    ap.add_argument("--snippets", type=int, default=2, help="the best drafts' snippets kept")
    ap.add_argument("--lines", type=int, default=8, help="lines each side of an occurrence")
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    a = ap.parse_args(argv)
    from infill_engine import load

    engine = load(a.model, device="cpu")
    report = {}
    print("repository               holes  snippets  model alone  +retrieved  +random  draft")
    for root in a.repos:
        if not root.is_dir():
            print(f"error: {root} is not a directory", file=sys.stderr)
            return 2
        r = evaluate(engine, root, a.holes, a.seed, a.snippets, a.lines)
        report[root.name] = r
        print(f"{root.name[:24]:24s} {r['holes']:5d} {r['with_snippets']:9d} "
              f"{100 * r['exact_none']:10.1f} % {100 * r['exact_retrieved']:9.1f} % "
              f"{100 * r['exact_random']:6.1f} % {100 * r['exact_draft']:5.1f} %")  # fmt: skip
    engine.close()
    if a.json:
        a.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
