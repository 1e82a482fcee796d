"""How often what is shown makes a compiling Python document fail `compile()`.

    python -m dllm_lab.eval_compile [--files 60] [--holes 3] [--no-model] [--verbose] [--json OUT]

Holes (lab/holes.py: `statement`, `line`, `function_body`) are cut from held-out Python files
of this environment's site-packages (corpus.is_held_out: neither the builtin model nor the
drafts' gate read them), and only holes whose holed document compiles are kept. For each, the
candidates an invoked request would have: the drafts of the document and of two files beside
it (as extra chunks), and the builtin model's fill (unless `--no-model`); `decide.decide` with
`Policy(automatic=False, ...)` (invoked) and with `automatic=True` chooses what is shown. A
shown item counts as rejected when the document with it in the hole fails CPython's
`compile(..., "exec", dont_inherit=True)`: compiled, never run.

Each hole is decided twice: on its document (`clean`), and on the same document with an
unrelated unfinished function appended at its end (`broken`: the user is typing elsewhere, so
the whole document compiles neither way and a whole-document check cannot tell); the items shown
there are checked against the clean document. The model's fill is the one of the clean
document (the broken one differs only past the end of the model's context).

Printed: holes, items shown, items that fail compile (by source: the model, drafts), the holes
whose first item (or any item) is exactly the missing text, for invoked and automatic requests,
and how long deciding took.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .corpus import is_held_out, site_packages_roots
from .holes import Hole, holes

KINDS = ("statement", "line", "function_body")
MAX_CHARS = 60_000  # files longer than this are left out (the model's context is far smaller)
EXTRA_CHARS = 20_000  # of each file beside the holed one, carried as an extra chunk
SKIP = frozenset({"tests", "test", "_vendor", "vendored", "__pycache__"})
BROKEN = "\n\ndef _editing(rows):\n    total = sum(\n"  # what the user is typing elsewhere


def compiles(source: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(source, "<hole>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return False
    return True


def held_out_files(limit: int, seed: int) -> list[tuple[Path, str]]:
    """Up to `limit` held-out Python files of site-packages, drawn at random, with text."""
    found: list[Path] = []
    for root in site_packages_roots():
        for p in sorted(root.rglob("*.py")):
            rel = p.relative_to(root)
            if SKIP & set(rel.parts[:-1]) or rel.name.startswith("test_"):
                continue
            if "dllm" in rel.parts[0] or not is_held_out("site-packages/" + rel.as_posix()):
                continue
            found.append(p)
    random.Random(seed).shuffle(found)
    out = []
    for p in found:
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if 0 < len(text) <= MAX_CHARS and "\r" not in text and compiles(text):
            out.append((p, text))
        if len(out) >= limit:
            break
    return out


def beside(path: Path, n: int = 2) -> list[tuple[str, str]]:
    """Up to n other Python files of the same folder, as extra chunks (path, text)."""
    out: list[tuple[str, str]] = []
    for p in sorted(path.parent.glob("*.py")):
        if p != path and len(out) < n:
            try:
                out.append((p.name, p.read_text(encoding="utf-8")[:EXTRA_CHARS]))
            except (OSError, UnicodeDecodeError):
                continue
    return out


def cut(files: Sequence[tuple[Path, str]], per_kind: int, seed: int) -> list[tuple[Path, Hole]]:
    rng = random.Random(seed)
    out = []
    for path, text in files:
        for kind in KINDS:
            for h in holes(text, "python", kind, rng, per_kind):
                if compiles(h.text):
                    out.append((path, h))
    return out


def evaluate(
    files: int, per_kind: int, seed: int, model: bool, verbose: bool = False
) -> dict[str, Any]:
    from infill_engine import InfillParams, load, planner
    from infill_engine.decide import Policy, Seen, decide, trusted
    from infill_engine.drafts import gather

    engine = load("builtin", device="cpu") if model else None
    cases = cut(held_out_files(files, seed), per_kind, seed)
    counts: Counter[str] = Counter()
    decide_s = 0.0
    for path, h in cases:
        fills: list[str] = []
        kind = ""
        if engine is not None:
            plan = planner.plan(h.text, h.offset, "python", engine.encode,
                                max_positions=engine.args.max_positions)  # fmt: skip
            params = InfillParams(span="auto", max_span=max(64, plan.max_span))
            fills = [engine.infill(h.prefix, h.suffix, params, plan=plan).text]
            kind = plan.kind
        counts["holes"] += 1
        for doc, text in (("clean", h.text), ("broken", h.text + BROKEN)):
            start = time.perf_counter()
            found = gather(text, h.offset, extra=beside(path))
            seen = Seen.whole(text, h.offset, "python", kind)
            trust = trusted("builtin")
            shown = {
                mode: decide(fills, found, seen, Policy(automatic=auto, trust_model=trust))
                for mode, auto in (("invoked", False), ("automatic", True))
            }
            decide_s += time.perf_counter() - start
            for mode, items in shown.items():
                right = [c.text.strip() == h.middle.strip() for c in items]
                counts[f"{doc} {mode} first exact"] += bool(right and right[0])
                counts[f"{doc} {mode} any exact"] += any(right)
                for c in items:
                    source = "model" if c.source == "model" else "draft"
                    counts[f"{doc} {mode} shown"] += 1
                    counts[f"{doc} {mode} shown {source}"] += 1
                    if not compiles(h.filled(c.text)):
                        counts[f"{doc} {mode} fail"] += 1
                        counts[f"{doc} {mode} fail {source}"] += 1
                        if verbose:
                            print(f"{doc} {mode} {source} {path.name}: {c.text!r}")
    out: dict[str, Any] = dict(sorted(counts.items()))
    out["decide ms per hole"] = round(1000 * decide_s / max(1, 2 * len(cases)), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dllm_lab.eval_compile",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("--files", type=int, default=60, help="held-out files drawn")
    ap.add_argument("--holes", type=int, default=3, help="holes per file and kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-model", action="store_true", help="drafts only, no model fill")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--verbose", action="store_true", help="print each item that fails")
    a = ap.parse_args(argv)
    out = evaluate(a.files, a.holes, a.seed, not a.no_model, a.verbose)
    for key, value in out.items():
        print(f"{key:28} {value}")
    if a.json:
        a.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
