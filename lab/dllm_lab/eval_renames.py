"""Inline completion after a rename: what the edit history's renames change in what is shown.

    python -m dllm_lab.eval_renames HISTORIES [--order forward|backward|both]
        [--languages python,go] [--json OUT] [--no-progress]

Each commit of mined histories (histories.py) is replayed hunk by hunk through the language
server's own document store (`Documents.change`, so the edit history is the server's, as in
replay_edits.py). After a hunk whose edit renamed a name at its binding
(infill_engine/edits/renames.py), every line that a hunk still to come writes and that reads a
new name is a hole: the document with that hunk applied and the line's text taken out, the
cursor at its indentation. The renames are those the history gives where that hunk starts
(the history describes the text before it). The holed document's drafts (drafts.gather, the
document alone: a history is one file) are decided as the server decides them
(decide.decide), invoked and automatic (the language's calibrated gate), once with no renames
and once with them.

Printed per language and pooled: holes; then for each trigger, what was shown and how often
the first item was the line taken out, without and with the renames; and how many holes' first
item the renames changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from infill_engine.decide import Policy, Seen, decide
from infill_engine.drafts import gather
from infill_engine.edits.bindings import renamed_by
from infill_engine.edits.renames import Renames, renames
from infill_engine.edits.text import words
from lsp_server.workspace.documents import Documents

from .histories import Commit, load
from .replay_edits import ENC, ORDERS, Span, did_change, replay_uri, steps

TRIGGERS = ("invoked", "automatic")


def holes(commit: Commit, order: str) -> Iterable[tuple[str, int, str, Renames]]:
    """(holed text, cursor, the line taken out (stripped), the renames there) for each line a
    hunk still to come writes that reads a name an edit just renamed."""
    docs, uri = Documents(), replay_uri(commit, order)
    doc = docs.open(uri, commit.language_id, 1, commit.text)
    for version, step in enumerate(steps(commit, order), start=2):
        docs.change(did_change(uri, version, step), ENC)
        edits = doc.history.edits()
        if not step.remaining or not edits or renamed_by(edits[-1]) is None:
            continue
        tree = doc.syntax_tree()
        for hunk in step.remaining:
            pairs = renames(doc.text, edits, tree, hunk.start)
            if pairs:
                yield from _lines(doc.text, hunk, pairs)


def _lines(text: str, hunk: Span, pairs: Renames) -> Iterable[tuple[str, int, str, Renames]]:
    applied, at = hunk.applied(text), hunk.start
    for line in hunk.text.splitlines(keepends=True):
        start, at = at, at + len(line)
        body = line.rstrip("\r\n")
        reads = any(next(words(body, new, 0, len(body)), None) for _, new in pairs)
        if not body.strip() or not reads:
            continue
        cursor = start + len(body) - len(body.lstrip(" \t"))
        yield applied[:cursor] + applied[start + len(body) :], cursor, body.strip(), pairs


def evaluate(commits: Sequence[Commit], orders: Sequence[str], progress: bool = False) -> dict:
    from tqdm import tqdm

    tallies: dict[str, Counter[str]] = {}
    bar = tqdm(commits, desc="commits", unit="commit", file=sys.stderr, disable=not progress)
    for commit in bar:
        for order in orders:
            for text, cursor, truth, pairs in holes(commit, order):
                t = tallies.setdefault(commit.language, Counter())
                _hole(t, text, cursor, truth, pairs, commit.language_id)
    pooled = sum(tallies.values(), Counter())
    return {lang: dict(t) for lang, t in sorted({**tallies, "pooled": pooled}.items())}


def _hole(t: Counter[str], text: str, cursor: int, truth: str, pairs: Renames, lang: str) -> None:
    t["holes"] += 1
    firsts: dict[str, list[str | None]] = {trigger: [] for trigger in TRIGGERS}
    for way, renamed in (("plain", ()), ("renamed", pairs)):
        found = gather(text, cursor, python=lang == "python", renamed=renamed)
        seen = Seen.whole(text, cursor, lang, renamed=renamed)
        for trigger in TRIGGERS:
            shown = decide([], found, seen, Policy(trigger == "automatic", False))
            first = shown[0].text.strip() if shown else None
            firsts[trigger].append(first)
            t[f"{trigger}_{way}_shown"] += first is not None
            t[f"{trigger}_{way}_exact"] += first == truth
    for trigger, (plain, renamed_first) in firsts.items():
        t[f"{trigger}_changed"] += plain != renamed_first


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dllm_lab.eval_renames",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("histories", type=Path, help="mined histories (dllm_lab.histories --out)")
    ap.add_argument("--order", choices=[*ORDERS, "both"], default="both")
    ap.add_argument("--languages", default="", help="comma-separated (default: all)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    wanted = {x for x in a.languages.split(",") if x}
    commits = [c for c in load(a.histories) if not wanted or c.language in wanted]
    orders = ORDERS if a.order == "both" else (a.order,)
    out = evaluate(commits, orders, progress=not a.no_progress)
    print(f"{'language':12} {'holes':>6}  " + "  ".join(
        f"{t}: shown exact (plain -> renamed), changed" for t in TRIGGERS))  # fmt: skip
    for lang, t in out.items():
        cells = [
            f"{t.get(f'{g}_plain_shown', 0)}/{t.get(f'{g}_plain_exact', 0)} -> "
            f"{t.get(f'{g}_renamed_shown', 0)}/{t.get(f'{g}_renamed_exact', 0)}, "
            f"{t.get(f'{g}_changed', 0)}"
            for g in TRIGGERS
        ]
        print(f"{lang:12} {t.get('holes', 0):>6}  " + "    ".join(cells))
    if a.json:
        a.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
