"""Cross-file evaluation (`dllm-infill eval-crossfile`): does context from other files of the same
package help the model fill a line that uses a name defined there?

Holes come from code the builtin model never trained on: the held-out stdlib files
(corpus.split_corpus) that sit in a package. A hole is one line whose text uses a name that a
sibling module of the package defines at its top level (found with `ast`) and the held-out file
itself does not define. The other files are offered the way the language server offers them
(lsp_server/workspace/crossfile.py): a store of 16 chunks × 64 lines holding the lines around the
name's definition in its module (as when the user has visited it) and, newer, the heads of the
package's other modules (as when they have been opened); the store chooses by the names the
lines before the cursor share with each chunk. Each hole is filled twice by the same engine
through the same native steps (hole.prepare), with and without the chosen chunks, at
the same prefix and suffix budgets and the same span (the line's own token length).

Reported, with and without: exact match (the line, trailing space aside), the rate at which
the file with the fill parses, the rate at which the fill writes the cross-file name; and the
cost: ms to choose the chunks, chunk tokens placed (each paid once per full pass: the prefix
cache keeps them), ms per fill.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .corpus import split_corpus, stdlib_root
from .holes import Hole

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MIN_NAME = 4  # shorter names are too often defined everywhere
PER_FILE = 25  # the most holes one file gives, so that a few files do not make the whole set
DISTRACTORS = 12  # other modules' heads in the store, beside the definition's chunk


@dataclass(frozen=True)
class Case:
    """A hole (its middle: the missing line, with its indentation and newline; its origin: the
    held-out file, relative to the stdlib) and what the other files offer for it."""

    hole: Hole
    name: str  # the sibling-defined name the line uses
    home: str  # the sibling module that defines it
    chunks: tuple[tuple[str, str, int, str], ...]  # (uri, text, start line, source), oldest first


def top_level_names(tree: ast.Module) -> dict[str, int]:
    """Names a module defines at its top level (def, class, assignment): their line (0-based)."""
    out: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.setdefault(node.name, node.lineno - 1)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, node.lineno - 1)
    return out


def defined_anywhere(tree: ast.Module) -> set[str]:
    """Every name a module binds itself (not by import): defs, classes, assignment targets."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
    return out


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def crossfile_holes(limit: int, seed: int, root: Path | None = None) -> list[Case]:
    """Up to `limit` holes from the held-out files of packages, at most PER_FILE from each."""
    base = root or stdlib_root()
    _, held = split_corpus(root=root)
    rng = random.Random(seed)
    per_file: list[list[Case]] = []
    for f in held:
        if "/" not in f.rel or (tree := _parse(f.text)) is None:
            continue
        folder = (base / f.rel).parent
        own = defined_anywhere(tree)
        siblings: dict[str, tuple[str, dict[str, int]]] = {}
        for path in sorted(folder.glob("*.py")):
            rel = path.relative_to(base).as_posix()
            if rel == f.rel or path.name.startswith("test"):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if (sib := _parse(text)) is not None:
                siblings[rel] = (text, top_level_names(sib))
        owner = {
            name: rel
            for rel, (_, names) in siblings.items()
            for name in names
            if len(name) >= MIN_NAME and name not in own
        }
        lines = f.text.splitlines(keepends=True)
        found: list[Case] = []
        for i in range(5, len(lines) - 1):
            line, body = lines[i], lines[i].strip()
            if len(body) < 4 or body.startswith(("#", "import ", "from ")):
                continue
            used = [n for n in _NAME.findall(body) if n in owner]
            if not used or not line.endswith("\n"):
                continue
            name = used[0]
            home = owner[name]
            chunks = _store_chunks(siblings, home, name, rng)
            prefix, suffix = "".join(lines[:i]), "".join(lines[i + 1 :])
            hole = Hole.cut(prefix, line, suffix, "line", origin=f.rel)
            found.append(Case(hole, name, home, chunks))
        rng.shuffle(found)
        if found:
            per_file.append(found[:PER_FILE])
    cases = [c for group in per_file for c in group]
    rng.shuffle(cases)
    return cases[:limit]


def _store_chunks(
    siblings: dict[str, tuple[str, dict[str, int]]], home: str, name: str, rng: random.Random
) -> tuple[tuple[str, str, int, str], ...]:
    """What the store is fed: the 64 lines around the definition, then other modules' heads."""
    from lsp_server.workspace.crossfile import CHUNK_LINES, window

    text, names = siblings[home]
    first, part = window(text, names[name], CHUNK_LINES)
    out = [(f"file:///stdlib/{home}", part, first, "edit")]
    others = [rel for rel in siblings if rel != home]
    for rel in rng.sample(others, min(DISTRACTORS, len(others))):
        head = "".join(siblings[rel][0].splitlines(keepends=True)[:CHUNK_LINES])
        out.append((f"file:///stdlib/{rel}", head, 0, "open"))
    return tuple(out)


@dataclass
class Tally:
    exact: int = 0
    parses: int = 0
    writes_name: int = 0
    ms: list[float] = field(default_factory=list)  # per fill: prepare and decode

    def add(self, case: Case, fill: str, ms: float) -> None:
        self.exact += fill.rstrip() == case.hole.middle.rstrip()
        self.parses += _parse(case.hole.filled(fill.rstrip("\n") + "\n")) is not None
        self.writes_name += case.name in fill
        self.ms.append(ms)

    def summary(self, n: int) -> dict[str, Any]:
        return {
            "exact_match": self.exact / n if n else 0.0,
            "parse_rate": self.parses / n if n else 0.0,
            "writes_name": self.writes_name / n if n else 0.0,
            "ms_per_fill": statistics.fmean(self.ms) if self.ms else 0.0,
        }


@dataclass(frozen=True)
class Config:
    model: str = "builtin"
    limit: int = 100
    seed: int = 0
    prefix_tokens: int = 160
    suffix_tokens: int = 64
    extra_tokens: int = 128
    max_span: int = 32


def _fill(engine: Any, hole: Hole, extra: Sequence[tuple[str, str]], cfg: Config) -> Any:
    from infill_engine.hole import Hole as Ask
    from infill_engine.hole import prepare
    from infill_engine.params import InfillParams

    span = max(1, min(cfg.max_span, len(engine.encode(hole.middle))))
    ask = Ask(
        hole.text,
        hole.offset,
        language_id=hole.language_id,
        priority="invoked",
        prefix_tokens=cfg.prefix_tokens,
        suffix_tokens=cfg.suffix_tokens,
        params=InfillParams(span=span, max_span=span, min_tokens=1),
        extra=tuple(extra),
        extra_tokens=cfg.extra_tokens,
    )
    prepared = prepare(engine, ask)
    (result,) = engine.run(prepared.requests)
    return prepared, result


def evaluate(cfg: Config) -> dict[str, Any]:
    from infill_engine import load
    from lsp_server.workspace.crossfile import ChunkStore

    t0 = time.perf_counter()
    engine = load(cfg.model, device="cpu")  # first: a bad --model fails before the corpus walk
    cases = crossfile_holes(cfg.limit, cfg.seed)
    plain, crossed = Tally(), Tally()
    choose_ms: list[float] = []
    extra_tokens: list[int] = []
    found = 0  # holes whose chosen and placed chunks include the definition's module
    try:
        if cases:  # a warm-up fill, not counted: the first one pays for lazy set-up
            _fill(engine, cases[0].hole, (), cfg)
        for case in cases:
            store = ChunkStore(roots=("file:///stdlib",))
            for uri, text, first, source in case.chunks:
                store.add(uri, text, first, source)
            uri = f"file:///stdlib/{case.hole.origin}"
            choice = store.choose(uri, case.hole.text, case.hole.offset, 128)
            choose_ms.append(choice.ms)
            for tally, extra in ((plain, ()), (crossed, choice.extra)):
                t = time.perf_counter()
                prepared, result = _fill(engine, case.hole, extra, cfg)
                tally.add(case, result.text, (time.perf_counter() - t) * 1000)
                placed = prepared.context.extra
                if extra and placed is not None:
                    extra_tokens.append(len(placed.ids))
                    found += case.home in placed.files
    finally:
        engine.close()
    n = len(cases)
    return {
        "holes": n,
        "files": len({c.hole.origin for c in cases}),
        "model": cfg.model,
        "budgets": {
            "prefix_tokens": cfg.prefix_tokens,
            "suffix_tokens": cfg.suffix_tokens,
            "extra_tokens": cfg.extra_tokens,
        },
        "without": plain.summary(n),
        "with": crossed.summary(n),
        "definition_placed": found / n if n else 0.0,
        "choose_ms": {
            "mean": statistics.fmean(choose_ms) if choose_ms else 0.0,
            "max": max(choose_ms, default=0.0),
        },
        "extra_tokens_mean": statistics.fmean(extra_tokens) if extra_tokens else 0.0,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def format_report(r: dict[str, Any]) -> str:
    w, c = r["without"], r["with"]
    rows = [
        f"{r['holes']} single-line holes in {r['files']} held-out stdlib files, model {r['model']}",
        f"{'':28}{'without':>10}{'with':>10}",
        f"{'exact match':28}{w['exact_match']:>10.1%}{c['exact_match']:>10.1%}",
        f"{'file parses':28}{w['parse_rate']:>10.1%}{c['parse_rate']:>10.1%}",
        f"{'fill writes the name':28}{w['writes_name']:>10.1%}{c['writes_name']:>10.1%}",
        f"{'ms per fill':28}{w['ms_per_fill']:>10.1f}{c['ms_per_fill']:>10.1f}",
        f"definition's module placed: {r['definition_placed']:.1%}; chunk tokens placed: "
        f"{r['extra_tokens_mean']:.1f} on average; choosing: {r['choose_ms']['mean']:.3f} ms "
        f"(max {r['choose_ms']['max']:.3f}); {r['seconds']} s in all",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    d = Config()
    about = " ".join(__doc__.split("\n\n")[0].split())  # the first paragraph, whole
    ap = argparse.ArgumentParser(prog="dllm-infill eval-crossfile", description=about)
    ap.add_argument("--model", default=d.model)
    ap.add_argument("--limit", type=int, default=d.limit, help="holes")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--prefix-tokens", type=int, default=d.prefix_tokens)
    ap.add_argument("--suffix-tokens", type=int, default=d.suffix_tokens)
    ap.add_argument("--extra-tokens", type=int, default=d.extra_tokens)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    for flag in ("limit", "prefix_tokens", "suffix_tokens", "extra_tokens"):
        if getattr(a, flag) < 0:
            ap.error(f"--{flag.replace('_', '-')} must be >= 0, got {getattr(a, flag)}")
    cfg = Config(a.model, a.limit, a.seed, a.prefix_tokens, a.suffix_tokens, a.extra_tokens)
    try:
        report = evaluate(cfg)
    except (OSError, ValueError) as e:  # a missing or corrupt model directory
        print(f"dllm-infill eval-crossfile: {e}", file=sys.stderr)
        return 2
    sys.stdout.write((json.dumps(report, indent=2) if a.json else format_report(report)) + "\n")
    return 0
