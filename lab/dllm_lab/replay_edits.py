"""Replay real commits through the language server, one hunk at a time, asking for the next edit.

    python -m dllm_lab.replay_edits HISTORIES.json.gz [--order forward|backward|both|shuffled]
        [--languages python,go] [--limit N] [--json OUT] [--fit [--write]]

The histories are small commits of public repositories (histories.py mines them; the list is
lab/histories.json). A real `dllm-infill-ls` (the builtin model unless `--model`) is started over
stdio. Each commit's file is opened as it was in the parent, and its hunks are sent one at a time,
each as one incremental didChange (the lines' common ends left out, as an editor sends what was
typed; the range in UTF-16 of the current text). After each, `textDocument/copilotInlineEdit` is
asked with the cursor at the end of the changed text, and timed. Forward replays the hunks top to
bottom, backward bottom to top, so that "the next edit is below" is not learned for free; each
order opens its own copy of the document. `shuffled` replays each commit's hunks in a seeded
order of its own, with no sweep at all.

The answer is scored against the hunks not yet applied (`score`):
* exact: the suggested edit applied to the current text gives the document that one remaining
  hunk gives (documents compared, so an equivalent range counts);
* partial: not exact, but a non-blank line the suggestion writes equals (stripped) a line that a
  remaining hunk adds, and the suggestion touches that hunk's lines;
* location: the suggestion's range lies on or next to the lines of a remaining hunk;
* step (reported beside, never counted as right): neither, but a step on the way to a remaining
  hunk: on the whole lines both touch, every token the suggestion takes away the hunk takes away
  too, and every token it writes the hunk writes too (`fetchQuery(queryKey, _callProcedure)`
  made `fetchQuery(queryKey, queryFn)` on the way to `fetchQuery({ queryKey, queryFn })`);
and each again against only the hunk that comes next in the replay order (strict). After the
last hunk of a multi-hunk commit nothing is owed (shown-after-last); after a single-hunk commit
whatever is shown is a false suggestion. Reported per language and pooled, per order, and per
kind of suggestion (rename, signature, shape, twin, model, hosted: read from `dllm/status`, whose
per-kind counts the server bumps as it answers), with p50/p95 round trips.

`--fit` fits the gate's thresholds per kind (infill_engine/assets/next_edits.json) on these
histories: every candidate the structure tier finds after each step, with its kind and score,
computed in this process by the functions the server's structure source calls (the same history
recording, tree and rules), since the wire's answer carries neither a score nor more than one
candidate. `fit_thresholds` then takes, per kind, the lowest threshold at which the exact-or-
partial precision is >= 0.7 and the commits of one hunk that it would answer stay <= 3 %;
`--write` writes them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infill_engine.edits.text import line_of, tokens
from lsp_server.workspace import positions

from .histories import LANGUAGES, Commit, load, split_lines

ORDERS = ("forward", "backward")
# No sweep at all: each commit's hunks in an order of their own, the same on every run. The
# user's direction (edits/text.heading) says nothing there; what a rule gains from following
# it in the two orders above, and loses where edits jump about, shows here.
SHUFFLED = "shuffled"
INLINE_EDIT = "textDocument/copilotInlineEdit"
THRESHOLDS_FILE = Path(__file__).resolve().parents[2] / "infill_engine/assets/next_edits.json"
ENC = "utf-16"


@dataclass(frozen=True)
class Span:
    """text[start:end] replaced by `text`."""

    start: int
    end: int
    text: str

    def applied(self, doc: str) -> str:
        return doc[: self.start] + self.text + doc[self.end :]


@dataclass(frozen=True)
class Step:
    """One hunk sent: `change` to the text before it (its common ends left out), the text
    after it, the cursor, and the hunks still to come as spans of that text (`remaining`,
    in replay order, the first being the next)."""

    change: Span
    before: str
    text: str
    cursor: int
    remaining: tuple[Span, ...]
    single: bool  # the commit has one hunk


def trimmed(doc: str, span: Span) -> Span:
    """The same change less the ends that the old and new text share."""
    old, new = doc[span.start : span.end], span.text
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return Span(span.start + head, span.end - tail, new[head : len(new) - tail])


def steps(commit: Commit, order: str) -> Iterator[Step]:
    """The commit's hunks, one Step each, in `order` (forward: top to bottom)."""
    if order not in (*ORDERS, SHUFFLED):
        raise ValueError(f"an order is one of {[*ORDERS, SHUFFLED]}, not {order!r}")
    n = len(commit.hunks)
    sequence = list(range(n)) if order == "forward" else list(range(n - 1, -1, -1))
    if order == SHUFFLED:  # the same order on every run: seeded by the commit
        random.Random(commit.sha).shuffle(sequence)
    applied = [False] * n
    text = commit.text

    def span(i: int, doc: str) -> Span:
        # the hunk's first line now: its parent line moved by the hunks above it applied
        line = commit.hunks[i].line + sum(
            commit.hunks[j].line_delta for j in range(i) if applied[j]
        )
        start = sum(len(x) for x in split_lines(doc)[:line])
        old = commit.hunks[i].old
        if doc[start : start + len(old)] != old:
            raise ValueError(f"{commit.repo}@{commit.sha[:10]}: hunk {i} does not fit its text")
        return Span(start, start + len(old), commit.hunks[i].new)

    for k, i in enumerate(sequence):
        change = trimmed(text, span(i, text))
        before, text = text, change.applied(text)
        applied[i] = True
        remaining = tuple(span(j, text) for j in sequence[k + 1 :])
        yield Step(change, before, text, change.start + len(change.text), remaining, n == 1)


@dataclass(frozen=True)
class Verdict:
    exact: bool = False
    partial: bool = False
    location: bool = False
    step: bool = False  # neither exact nor partial, but a step on the way to a remaining hunk
    next_exact: bool = False  # the same, against the next hunk only
    next_partial: bool = False
    next_location: bool = False


def _lines_of(doc: str, start: int, end: int) -> tuple[int, int]:
    """The first and last line that text[start:end] is on (an empty span: its line twice)."""
    first = doc.count("\n", 0, start)
    last = doc.count("\n", 0, max(start, end - 1)) if end > start else first
    return first, last


def _written(before: str, span: Span) -> set[str]:
    """The stripped non-blank lines that span writes: the whole lines it touches after it, less
    those that were there already."""
    after = span.applied(before)
    a, z_old = line_of(before, span.start)[0], line_of(before, span.end)[1]
    z_new = line_of(after, span.start + len(span.text))[1]
    old = before[a:z_old].split("\n")
    new = after[a:z_new].split("\n")
    return {x.strip() for x in new if x.strip()} - {x.strip() for x in old}


def _touches(doc: str, s: Span, h: Span) -> bool:
    sl, el = _lines_of(doc, s.start, s.end)
    hs, he = _lines_of(doc, h.start, h.end)
    if h.start == h.end:  # an insertion: between the line before and its own
        hs, he = hs, hs - 1
    return sl <= he + 1 and el >= hs - 1


def _step_toward(doc: str, s: Span, h: Span) -> bool:
    """Whether s changes some token and, on the whole lines that s and h touch, takes away only
    tokens that h takes away and writes only tokens that h writes (counted with repeats)."""
    a, z = line_of(doc, min(s.start, h.start))[0], line_of(doc, max(s.end, h.end))[1]
    before = Counter(t.text for t in tokens(doc[a:z]))

    def change(x: Span) -> tuple[Counter[str], Counter[str]]:
        after = Counter(
            t.text for t in tokens(x.applied(doc)[a : z + len(x.text) - (x.end - x.start)])
        )
        return before - after, after - before

    (s_out, s_in), (h_out, h_in) = change(s), change(h)
    return bool(s_out or s_in) and s_out <= h_out and s_in <= h_in


def score(doc: str, suggestion: Span, remaining: Sequence[Span]) -> Verdict:
    """How the suggestion (a change to doc) fares against the hunks still to come (spans of
    doc; the first is the next)."""
    result = suggestion.applied(doc)
    written = _written(doc, suggestion)
    flags = []
    for h in remaining:
        exact = result == h.applied(doc)
        near = _touches(doc, suggestion, h)
        partial = not exact and near and bool(written & _written(doc, h))
        flags.append((exact, partial, near))
    first = flags[0] if flags else (False, False, False)
    exact = any(f[0] for f in flags)
    partial = not exact and any(f[1] for f in flags)
    step = not (exact or partial) and any(
        f[2] and _step_toward(doc, suggestion, h) for f, h in zip(flags, remaining, strict=True)
    )
    return Verdict(
        exact=exact,
        partial=partial,
        location=any(f[2] for f in flags),
        step=step,
        next_exact=first[0],
        next_partial=first[1],
        next_location=first[2],
    )


@dataclass
class Tally:
    """The counts of one group (a language and an order, or pooled)."""

    successor: int = 0  # asks after an edit that another follows
    shown: int = 0
    exact: int = 0
    partial: int = 0
    location: int = 0
    step: int = 0
    next_exact: int = 0
    next_partial: int = 0
    next_location: int = 0
    last: int = 0  # asks after the last hunk of a multi-hunk commit
    shown_after_last: int = 0
    single: int = 0  # commits of one hunk
    false: int = 0  # shown after one
    errors: int = 0  # requests that failed
    ms: list[float] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)  # kind:outcome

    def add(self, step: Step, kind: str | None, verdict: Verdict | None, ms: float) -> None:
        self.ms.append(ms)
        outcome = "none"
        if step.single:
            self.single += 1
            self.false += verdict is not None
            outcome = "false"
        elif not step.remaining:
            self.last += 1
            self.shown_after_last += verdict is not None
            outcome = "after_last"
        else:
            self.successor += 1
            if verdict is not None:
                self.shown += 1
                for name in (
                    "exact",
                    "partial",
                    "location",
                    "step",
                    "next_exact",
                    "next_partial",
                    "next_location",
                ):
                    setattr(self, name, getattr(self, name) + getattr(verdict, name))
                outcome = (
                    "exact" if verdict.exact
                    else "partial" if verdict.partial
                    else "step" if verdict.step
                    else "wrong"
                )  # fmt: skip
        if verdict is not None:
            self.kinds[f"{kind or '?'}:{outcome}"] += 1

    def report(self) -> dict[str, Any]:
        n, shown = self.successor, self.shown

        def pct(a: int, b: int) -> float | None:
            return round(100 * a / b, 1) if b else None

        kinds: dict[str, dict[str, int]] = {}
        for key, count in self.kinds.items():
            kind, outcome = key.split(":")
            kinds.setdefault(kind, {})[outcome] = count
        return {
            "edits_with_successor": n,
            "shown_pct": pct(shown, n),
            "exact_pct": pct(self.exact, n),
            "partial_pct": pct(self.partial, n),
            "right_of_shown_pct": pct(self.exact + self.partial, shown),
            "right_or_step_of_shown_pct": pct(self.exact + self.partial + self.step, shown),
            "location_pct": pct(self.location, n),
            "next_exact_pct": pct(self.next_exact, n),
            "next_right_of_shown_pct": pct(self.next_exact + self.next_partial, shown),
            "next_location_pct": pct(self.next_location, n),
            "shown_after_last_pct": pct(self.shown_after_last, self.last),
            "single_commits": self.single,
            "false_after_single_pct": pct(self.false, self.single),
            "p50_ms": _pct(self.ms, 0.5),
            "p95_ms": _pct(self.ms, 0.95),
            "requests": len(self.ms),
            "errors": self.errors,
            "counts": {
                k: getattr(self, k)
                for k in (
                    "shown",
                    "exact",
                    "partial",
                    "location",
                    "step",
                    "last",
                    "shown_after_last",
                    "false",
                )
            },
            "kinds": kinds,
        }


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, round(q * (len(s) - 1)))], 2)


def _position(text: str, offset: int) -> dict[str, int]:
    line, character = positions.position_at(text, offset, ENC)
    return {"line": line, "character": character}


def _suggestion(doc: str, answer: Any) -> Span | None:
    """The answer's one edit of this document as a Span of doc, or None (none, or not ours)."""
    edits = answer.get("edits") if isinstance(answer, dict) else None
    if not edits or not isinstance(edits[0], dict):
        return None
    e, r = edits[0], edits[0].get("range") or {}
    a = positions.offset_clamped(doc, r["start"]["line"], r["start"]["character"], ENC)
    z = positions.offset_clamped(doc, r["end"]["line"], r["end"]["character"], ENC)
    return Span(min(a, z), max(a, z), str(e.get("text", "")))


def did_change(uri: str, version: int, step: Step) -> dict[str, Any]:
    """The step's one incremental didChange, its range in UTF-16 of the text before it."""
    c = step.change
    return {
        "textDocument": {"uri": uri, "version": version},
        "contentChanges": [
            {
                "range": {
                    "start": _position(step.before, c.start),
                    "end": _position(step.before, c.end),
                },
                "text": c.text,
            }
        ],
    }


def typed_change(uri: str, version: int, step: Step) -> Any:
    """did_change as pygls's client sends it (typed)."""
    from lsprotocol import types as lsp

    r = did_change(uri, version, step)["contentChanges"][0]
    return lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(version, uri),
        [
            lsp.TextDocumentContentChangePartial(
                lsp.Range(lsp.Position(**r["range"]["start"]), lsp.Position(**r["range"]["end"])),
                r["text"],
            )
        ],
    )


def replay_uri(commit: Commit, order: str) -> str:
    return f"file:///replay/{commit.repo}/{commit.sha[:12]}/{order}/{commit.path}"


def _bar(total: int, on: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc="edits", unit="edit", file=sys.stderr, disable=not on)


Groups = dict[tuple[str, str], Tally]


async def replay(
    commits: Sequence[Commit],
    orders: Sequence[str],
    server: Sequence[str],
    settings: dict[str, Any],
    progress: bool = False,
    env: dict[str, str] | None = None,
) -> tuple[Groups, dict[str, Any]]:
    """Every commit replayed in every order through one server; the tallies per (language,
    order), and the server's dllm/status at the end."""
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    from .bench_lsp import plain

    client = LanguageClient("dllm-replay-edits", "0")

    @client.feature(lsp.WINDOW_LOG_MESSAGE)
    def _log(params: lsp.LogMessageParams) -> None:
        pass  # the server's log lines are not the report

    await client.start_io(*server, env=env)
    caps = lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=False))
    await client.initialize_async(
        lsp.InitializeParams(capabilities=caps, initialization_options=settings)
    )
    client.initialized(lsp.InitializedParams())

    async def status() -> dict[str, Any]:
        return dict(plain(await client.protocol.send_request_async("dllm/status", None)))

    groups: Groups = {}
    try:
        for _ in range(1200):
            if (s := await status()).get("state") in ("ready", "failed"):
                break
            await asyncio.sleep(0.05)
        suggested = _suggested(s)
        bar = _bar(sum(len(c.hunks) for c in commits) * len(orders), progress)
        for commit in commits:
            for order in orders:
                tally = groups.setdefault((commit.language, order), Tally())
                uri, version = replay_uri(commit, order), 1
                client.text_document_did_open(
                    lsp.DidOpenTextDocumentParams(
                        lsp.TextDocumentItem(uri, commit.language_id, version, commit.text)
                    )
                )
                for step in steps(commit, order):
                    version += 1
                    client.text_document_did_change(typed_change(uri, version, step))
                    ask = {
                        "textDocument": {"uri": uri, "version": version},
                        "position": _position(step.text, step.cursor),
                    }
                    t0 = time.perf_counter()
                    try:
                        answer = plain(await client.protocol.send_request_async(INLINE_EDIT, ask))
                    except Exception:  # an error answer is counted, not fatal
                        tally.errors += 1
                        answer = None
                    ms = (time.perf_counter() - t0) * 1000
                    shown = _suggestion(step.text, answer)
                    kind = None
                    if shown is not None:
                        now = _suggested(await status())
                        kind = next((k for k in now if now[k] > suggested.get(k, 0)), None)
                        suggested = now
                    verdict = None if shown is None else score(step.text, shown, step.remaining)
                    tally.add(step, kind, verdict, ms)
                    bar.update(1)
                client.text_document_did_close(
                    lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri))
                )
        bar.close()
        final = await status()
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
    return groups, final


def _suggested(status: dict[str, Any]) -> dict[str, int]:
    kinds = (status.get("next_edits") or {}).get("kinds") or {}
    return {k: int(v.get("suggested", 0)) for k, v in kinds.items()}


# --- the gate's fit -----------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One ask: `when` ("successor", "last" or "single"), and every candidate found then, as
    (kind, score, right: exact or partial against the hunks to come)."""

    when: str
    found: tuple[tuple[str, float, bool], ...]


def in_process_candidates(commit: Commit, order: str) -> Iterator[Probe]:
    """The structure tier's candidates after each step, as the server's structure source finds
    them: the same documents (history recording, trimming, tree) fed the same didChange."""
    from infill_engine.edits.structure import candidates
    from infill_engine.edits.suggestion import sound
    from lsp_server.workspace.documents import Documents

    docs, uri = Documents(), replay_uri(commit, order)
    doc = docs.open(uri, commit.language_id, 1, commit.text)
    for version, step in enumerate(steps(commit, order), start=2):
        docs.change(did_change(uri, version, step), ENC)
        found = candidates(
            doc.text, doc.history.edits(), doc.language_id, step.cursor, doc.syntax_tree()
        )
        when = "single" if step.single else "successor" if step.remaining else "last"
        rows = []
        edits = doc.history.edits()
        last = edits[-1] if edits else None
        for s in found:
            if (
                s.uri is None
                and s.applies_to(doc.text)
                and sound(s, doc.text, doc.language_id, last)
            ):
                v = score(doc.text, Span(s.start, s.end, s.text), step.remaining)
                rows.append((s.kind, s.score, v.exact or v.partial))
        yield Probe(when, tuple(rows))


def fit_thresholds(
    probes: Sequence[Probe],
    precision: float = 0.7,
    max_false: float = 0.03,
    min_shown: int = 5,
) -> dict[str, float | None]:
    """Per kind found, the lowest threshold (one of its scores) at which its best candidate at
    each ask is right (exact or partial) `precision` of the time where an edit follows, shown
    at least `min_shown` times there, and shown after at most `max_false` of the single-hunk
    commits; None where no threshold does (the kind should not be shown)."""
    singles = sum(p.when == "single" for p in probes)
    out: dict[str, float | None] = {}
    for kind in sorted({k for p in probes for k, _, _ in p.found}):
        best = []  # (when, score, right) of the kind's surest candidate at each ask
        for p in probes:
            mine = [(s, r) for k, s, r in p.found if k == kind]
            if mine:
                best.append((p.when, *max(mine)))
        out[kind] = None
        for t in sorted({s for _, s, _ in best}):
            shown = [r for w, s, r in best if w == "successor" and s >= t]
            false = sum(w == "single" and s >= t for w, s, _ in best)
            if (
                len(shown) >= min_shown
                and sum(shown) >= precision * len(shown)
                and false <= max_false * singles
            ):
                out[kind] = t
                break
    return out


def gated(probes: Sequence[Probe], thresholds: dict[str, float]) -> dict[str, Any]:
    """What the gate shows with these thresholds (the surest candidate over its kind's bar):
    shown and right where an edit follows, and false after single-hunk commits."""
    counts: Counter[str] = Counter()
    for p in probes:
        passing = [(s, r) for k, s, r in p.found if s >= thresholds.get(k, 2.0)]
        counts[p.when] += 1
        if passing:
            counts[f"{p.when}_shown"] += 1
            counts[f"{p.when}_right"] += max(passing)[1]
    n, shown = counts["successor"], counts["successor_shown"]
    return {
        "edits_with_successor": n,
        "shown_pct": round(100 * shown / n, 1) if n else None,
        "right_of_shown_pct": round(100 * counts["successor_right"] / shown, 1) if shown else None,
        "false_after_single_pct": (
            round(100 * counts["single_shown"] / counts["single"], 1) if counts["single"] else None
        ),
    }


def curves(probes: Sequence[Probe], step: float = 0.1) -> dict[str, list[dict[str, Any]]]:
    """Per kind, at thresholds 0, step, 2 step, ...: where an edit follows, how often its surest
    candidate passes (shown %) and is right among those (right %); after single-hunk commits,
    how often it passes (false %). And `oracle`: how often any candidate at all is right."""
    succ = [p for p in probes if p.when == "successor"]
    singles = [p for p in probes if p.when == "single"]
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in sorted({k for p in probes for k, _, _ in p.found}):

        def best(p: Probe, kind: str = kind) -> tuple[float, bool] | None:
            mine = [(s, r) for k, s, r in p.found if k == kind]
            return max(mine) if mine else None

        rows = []
        for i in range(round(1 / step)):
            t = round(i * step, 3)
            shown = [b for p in succ if (b := best(p)) is not None and b[0] >= t]
            false = sum((b := best(p)) is not None and b[0] >= t for p in singles)
            if not shown and not false:
                break
            rows.append(
                {
                    "threshold": t,
                    "shown_pct": round(100 * len(shown) / max(len(succ), 1), 2),
                    "right_pct": round(100 * sum(r for _, r in shown) / len(shown), 1)
                    if shown
                    else None,
                    "false_pct": round(100 * false / max(len(singles), 1), 2),
                }
            )
        out[kind] = rows
    right = sum(any(r for _, _, r in p.found) for p in succ)
    out["oracle"] = [{"right_somewhere_pct": round(100 * right / max(len(succ), 1), 2)}]
    return out


def write_thresholds(fitted: dict[str, float | None], path: Path = THRESHOLDS_FILE) -> None:
    """Fitted kinds written into the thresholds file (a kind never right enough: 1.01, never
    shown); the kinds not fitted keep theirs."""
    raw = json.loads(path.read_text())
    for kind, t in fitted.items():
        raw["thresholds"][kind] = 1.01 if t is None else t
    path.write_text(json.dumps(raw, indent=2) + "\n")


def _whole_words(doc: str, change: Span) -> tuple[str, str]:
    """The change's old and new text grown to whole words (w -> width, not "" -> "idth")."""
    a, z = change.start, change.end
    while a > 0 and (doc[a - 1].isalnum() or doc[a - 1] == "_"):
        a -= 1
    while z < len(doc) and (doc[z].isalnum() or doc[z] == "_"):
        z += 1
    return doc[a:z], doc[a : change.start] + change.text + doc[change.end : z]


def relations(commits: Sequence[Commit], orders: Sequence[str]) -> Counter[str]:
    """What the hunks still to come have to do with the edit just made, at each ask where an
    edit follows (the first that holds): the same replacement (the edit's old text replaced by
    its new one in a remaining hunk gives that hunk), the same deletion, the same insertion, a
    line it wrote is written again, or other. How much a rule that repeats the last edit could
    cover, whatever the rules are today."""
    out: Counter[str] = Counter()
    for commit in commits:
        for order in orders:
            for st in steps(commit, order):
                if st.single or not st.remaining:
                    continue
                old, new = _whole_words(st.before, st.change)
                pairs = [(st.text[h.start : h.end], h.text) for h in st.remaining]
                written = {x.strip() for x in new.split("\n") if x.strip()}
                if old and new and any(old in o and o.replace(old, new) == n for o, n in pairs):
                    out["same replacement"] += 1
                elif (
                    old
                    and not new
                    and any(old in o and o.replace(old, "", 1) == n for o, n in pairs)
                ):
                    out["same deletion"] += 1
                elif not old and any(not o and n.strip() == new.strip() for o, n in pairs):
                    out["same insertion"] += 1
                elif any(written & {x.strip() for x in n.split("\n")} for _, n in pairs):
                    out["a written line again"] += 1
                else:
                    out["other"] += 1
    return out


# --- the command --------------------------------------------------------------------------


def report(groups: Groups, languages: Sequence[str], orders: Sequence[str]) -> dict[str, Any]:
    """Per language (each order, and both) and pooled."""

    def merged(keys: Sequence[tuple[str, str]]) -> Tally:
        t = Tally()
        for key in keys:
            g = groups.get(key)
            if g is None:
                continue
            for name in vars(t):
                if name == "ms":
                    t.ms += g.ms
                elif name == "kinds":
                    t.kinds.update(g.kinds)
                else:
                    setattr(t, name, getattr(t, name) + getattr(g, name))
        return t

    out: dict[str, Any] = {"languages": {}}
    for lang in [*languages, "pooled"]:
        keys = lambda o, lang=lang: [(x, o) for x in (languages if lang == "pooled" else [lang])]  # noqa: E731
        out["languages"][lang] = {
            **{o: merged(keys(o)).report() for o in orders},
            "both": merged([k for o in orders for k in keys(o)]).report(),
        }
    return out


COLUMNS = (
    ("edits_with_successor", "edits", 6),
    ("shown_pct", "shown%", 7),
    ("exact_pct", "exact%", 7),
    ("partial_pct", "part%", 6),
    ("right_of_shown_pct", "right/shown%", 13),
    ("right_or_step_of_shown_pct", "+steps%", 8),
    ("location_pct", "loc%", 6),
    ("next_right_of_shown_pct", "next right/shown%", 18),
    ("shown_after_last_pct", "after last%", 12),
    ("single_commits", "singles", 8),
    ("false_after_single_pct", "false%", 7),
    ("p50_ms", "p50 ms", 7),
    ("p95_ms", "p95 ms", 7),
)


def table(out: dict[str, Any], order: str = "both") -> str:
    """A markdown table of one order's figures per language."""
    head = "| language | " + " | ".join(label for _, label, _ in COLUMNS) + " |"
    rows = [head, "|" + "---|" * (len(COLUMNS) + 1)]
    for lang, by in out["languages"].items():
        r = by[order]
        cells = ["-" if r[k] is None else str(r[k]) for k, _, _ in COLUMNS]
        rows.append(f"| {lang} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def kind_table(out: dict[str, Any], order: str = "both") -> str:
    """Pooled, per kind of suggestion: what its shown answers were."""
    kinds = out["languages"]["pooled"][order]["kinds"]
    cols = ("exact", "partial", "step", "wrong", "after_last", "false")
    rows = ["| kind | " + " | ".join(cols) + " | right/shown% |", "|" + "---|" * (len(cols) + 2)]
    for kind, c in sorted(kinds.items()):
        shown = sum(c.get(x, 0) for x in ("exact", "partial", "step", "wrong"))
        right = c.get("exact", 0) + c.get("partial", 0)
        pct = f"{100 * right / shown:.1f}" if shown else "-"
        rows.append(f"| {kind} | " + " | ".join(str(c.get(x, 0)) for x in cols) + f" | {pct} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m dllm_lab.replay_edits", description=__doc__.split("\n")[0]
    )
    ap.add_argument("histories", type=Path, nargs="+", help="mined histories (histories.py)")
    ap.add_argument("--order", choices=(*ORDERS, "both", SHUFFLED), default="both")
    ap.add_argument("--languages", default=",".join(LANGUAGES))
    ap.add_argument("--limit", type=int, default=None, help="at most this many commits a language")
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--json", type=Path, default=None, help="write the report here ('-': stdout)")
    ap.add_argument(
        "--gate", type=float, default=None, help="nextEdits.gate, every kind's threshold (0: open)"
    )
    ap.add_argument("--fit", action="store_true", help="fit the gate's thresholds per kind")
    ap.add_argument("--write", action="store_true", help="with --fit: write them (next_edits.json)")
    ap.add_argument(
        "--relations", action="store_true", help="what the next hunks repeat (no server)"
    )
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    languages = [x for x in a.languages.split(",") if x]
    if bad := [x for x in languages if x not in LANGUAGES]:
        ap.error(f"--languages: not one of {list(LANGUAGES)}: {bad}")
    if a.limit is not None and a.limit < 1:
        ap.error(f"--limit must be >= 1, got {a.limit}")
    if a.gate is not None and not 0.0 <= a.gate <= 1.0:
        ap.error(f"--gate is a number from 0 to 1, got {a.gate}")
    if a.write and not a.fit:
        ap.error("--write needs --fit")
    orders = list(ORDERS) if a.order == "both" else [a.order]
    try:
        commits = select([c for p in a.histories for c in load(p)], languages, a.limit)
        if a.relations:
            found = relations(commits, orders)
            total = sum(found.values())
            print(json.dumps({k: [n, round(100 * n / total, 1)] for k, n in found.most_common()}))
            return 0
        if a.fit:
            out = fit(commits, orders, a.write, not a.no_progress)
        else:
            out = run(commits, orders, languages, a.model, not a.no_progress, a.gate)
    except (OSError, RuntimeError, ValueError, KeyError) as e:
        print(f"replay-edits: {e}", file=sys.stderr)
        return 2
    if a.json is not None:
        text = json.dumps(out, indent=1, allow_nan=False)
        print(text) if str(a.json) == "-" else a.json.write_text(text + "\n")
    if str(a.json) == "-":
        return 0
    if not a.fit:
        for order in [*orders, "both"] if len(orders) > 1 else orders:
            print(f"\n{order}:\n{table(out, order)}")
        print(f"\nper kind (pooled, {'both orders' if len(orders) > 1 else orders[0]}):")
        print(kind_table(out, "both" if len(orders) > 1 else orders[0]))
    else:
        print(json.dumps(out, indent=1))
    return 0


def select(commits: Sequence[Commit], languages: Sequence[str], limit: int | None) -> list[Commit]:
    """The commits of these languages, at most `limit` a language (in the order of their
    hashes: a mix of repositories and of single- and multi-hunk commits)."""
    seen: Counter[str] = Counter()
    out = []
    for c in sorted(commits, key=lambda c: (c.sha, c.repo)):  # a fixed mix of repositories
        if c.language in languages and (limit is None or seen[c.language] < limit):
            seen[c.language] += 1
            out.append(c)
    return out


def run(
    commits: Sequence[Commit],
    orders: Sequence[str],
    languages: Sequence[str],
    model: str,
    progress: bool,
    gate: float | None = None,
) -> dict[str, Any]:
    settings: dict[str, Any] = {"model": model, "debounceMs": 0, "stats": {"enabled": False}}
    if gate is not None:
        settings["nextEdits"] = {"gate": gate}
    server = [sys.executable, "-m", "lsp_server", "--log-level", "WARNING"]
    with tempfile.TemporaryDirectory(prefix="dllm-replay-") as state:
        env = {**os.environ, "XDG_STATE_HOME": state}  # not the user's acceptance counts
        groups, final = asyncio.run(replay(commits, orders, server, settings, progress, env))
    out = report(groups, languages, orders)
    out["commits"] = len(commits)
    out["model"], out["device"] = final.get("model"), final.get("device")
    out["revision"] = _revision()
    out["settings"] = settings
    return out


def _revision() -> str | None:
    """This tree's commit (and whether it has changes): the rules the figures are of."""
    import subprocess

    done = subprocess.run(
        ["git", "-C", str(THRESHOLDS_FILE.parents[2]), "describe", "--always", "--dirty"],
        capture_output=True,
        check=False,
    )
    return done.stdout.decode().strip() or None


def fit(commits: Sequence[Commit], orders: Sequence[str], write: bool, progress: bool) -> dict:
    probes = []
    bar = _bar(sum(len(c.hunks) for c in commits) * len(orders), progress)
    for c in commits:
        for order in orders:
            for probe in in_process_candidates(c, order):
                probes.append(probe)
                bar.update(1)
    bar.close()
    fitted = fit_thresholds(probes)
    if write:
        write_thresholds(fitted)
    current = json.loads(THRESHOLDS_FILE.read_text())["thresholds"]
    usable = {k: (1.01 if v is None else v) for k, v in fitted.items()}
    return {
        "fitted": fitted,
        "asks": len(probes),
        "with_fitted": gated(probes, {**current, **usable}),
        "with_file": gated(probes, current),
        "curves": curves(probes),
    }


if __name__ == "__main__":
    raise SystemExit(main())
