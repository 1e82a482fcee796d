"""Acceptance statistics of inline completions and the backend's health, kept on this machine.

Owns what the server counts about its own completions, per language: requests answered and
their latency (p50/p95), failed requests, items sent, and of those the items the editor showed,
accepted whole, or accepted in part. Editors report these over standard LSP: every item carries
an accept `command` (`dllm.accepted`, arguments `[{"id", "languageId"}]`) that the editor runs
when the user takes it, and the notifications `textDocument/didShowCompletion` (`{item}`) and
`textDocument/didPartiallyAcceptCompletion` (`{item, acceptedLength}`) name the item by the same
command. Each item is counted once per kind however often the editor repeats itself; an id this
session did not hand out is not counted.

Next edits (protocol/next_edits.py) are counted apart, per kind of suggestion (`rename`, ...,
infill_engine.edits.suggestion.KINDS), for this session only: the requests asked, the
suggestions sent, shown (`textDocument/didShowInlineEdit`, `{item}` as above) and accepted (the
command `dllm.nextEditAccepted`, arguments `[id]`).

Nothing is sent anywhere. The totals are merged into one JSON file in the user's state
directory (`$XDG_STATE_HOME/dllm-infill/stats.json`, else `~/.local/state/...`) at most every
FLUSH_S seconds and at shutdown, under a lock, so that several sessions add up; `dllm-infill-ls
stats` prints it. With counting off (`stats.enabled: false`) items carry no command, reports are
ignored and nothing is written.

The health (`ok`, `slow`, `failing`, or `idle` before any request) is read from the last RECENT
requests of the last RECENT_S seconds, whatever the setting: `failing` when at least half of
them failed (of at least MIN_RECENT), `slow` when their median latency is over `stats.slowMs`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from infill_engine.fields import is_int
from infill_engine.percentiles import nearest_rank

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: sessions may then lose each other's counts
    fcntl = None  # type: ignore[assignment]

ACCEPT_COMMAND = "dllm.accepted"
DID_SHOW = "textDocument/didShowCompletion"
DID_PARTIALLY_ACCEPT = "textDocument/didPartiallyAcceptCompletion"
# Upper edges (ms) of the persisted latency histogram; one more bucket takes the rest. Coarse
# on purpose: it only has to say "about 400 ms" or "seconds", and buckets add up across sessions.
BUCKETS_MS = (25, 50, 100, 200, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000, 10000, 30000)
KEEP_ITEMS = 4096  # items remembered for their reports: a shown item is reported within seconds
KEEP_LATENCIES = 1000  # per language, for this session's exact percentiles
RECENT, RECENT_S, MIN_RECENT = 20, 300.0, 4
FLUSH_S = 5.0
FILE_VERSION = 1


def state_file() -> Path:
    """Where the totals are kept: $XDG_STATE_HOME/dllm-infill/stats.json."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dllm-infill" / "stats.json"


def bucket_percentile(hist: list[int], q: float) -> float | None:
    """The upper edge of the bucket holding the q-th percentile (None past the last edge)."""
    total = sum(hist)
    if total == 0:
        return None
    need, seen = -(-total * q // 100), 0
    for i, n in enumerate(hist):
        seen += n
        if seen >= need:
            return float(BUCKETS_MS[i]) if i < len(BUCKETS_MS) else None
    return None  # pragma: no cover - seen reaches total


def bucket_of(ms: float) -> int:
    return next((i for i, edge in enumerate(BUCKETS_MS) if ms <= edge), len(BUCKETS_MS))


@dataclass
class Counts:
    """One language's counts; they add up across sessions."""

    requests: int = 0  # inline requests answered (a cancelled one is not)
    errors: int = 0  # requests that failed (the editor got no items)
    items: int = 0  # items sent
    shown: int = 0  # items the editor showed
    accepted: int = 0  # items accepted whole
    partial: int = 0  # items accepted in part (a word, a line), each once
    partial_chars: int = 0  # characters taken that way: each item's longest acceptedLength
    latency_hist: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS_MS) + 1))

    def add(self, other: Counts) -> None:
        for f in fields(self):
            if f.name != "latency_hist":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        self.latency_hist = [
            a + b for a, b in zip(self.latency_hist, other.latency_hist, strict=True)
        ]

    def summary(self, latencies: list[float] | None = None) -> dict[str, Any]:
        """The counts, the acceptance rate (accepted / shown) and p50/p95 latency: exact from
        `latencies` when given, else the histogram's bucket edges."""
        out: dict[str, Any] = {k: v for k, v in asdict(self).items() if k != "latency_hist"}
        out["acceptance_rate"] = round(self.accepted / self.shown, 3) if self.shown else None
        for q in (50, 95):
            if latencies is not None:
                value = nearest_rank(latencies, q)
                out[f"p{q}_ms"] = None if value is None else round(value, 1)
            else:
                out[f"p{q}_ms"] = bucket_percentile(self.latency_hist, q)
        return out

    @classmethod
    def from_json(cls, raw: Any) -> Counts:
        """Counts from a file's entry; what does not fit is dropped, not trusted."""
        c = cls()
        if not isinstance(raw, dict):
            return c
        for f in fields(cls):
            v = raw.get(f.name)
            if f.name == "latency_hist":
                hist = v if isinstance(v, list) and len(v) == len(c.latency_hist) else []
                if hist and all(isinstance(n, int) and n >= 0 for n in hist):
                    c.latency_hist = [int(n) for n in hist]
            elif is_int(v) and v >= 0:
                setattr(c, f.name, v)
        return c


@dataclass
class _Item:
    language: str
    source: str = "model"  # "model", or the draft's source (infill_engine/drafts)
    kind: str | None = None  # a next edit's kind; None: an inline completion
    shown: bool = False
    accepted: bool = False
    partial_len: int = 0


def item_id(raw: Any) -> str | None:
    """The id in an item as editors send it back: `{command: {arguments: [{id}]}}`."""
    if not isinstance(raw, dict):
        return None
    command = raw.get("command")
    args = command.get("arguments") if isinstance(command, dict) else None
    first = args[0] if isinstance(args, list) and args else None
    return command_id(first)


def command_id(arg: Any) -> str | None:
    """The id in the accept command's first argument, `{"id": ..., "languageId": ...}` (a next
    edit's: the id itself)."""
    value = arg.get("id") if isinstance(arg, dict) else arg
    return value if isinstance(value, str) and 0 < len(value) <= 64 else None


class Stats:
    """This session's counts, what of them is not in the file yet, and the recent requests."""

    def __init__(self, path: Path | None = None, enabled: bool = True, slow_ms: float = 2000.0):
        self.path = path  # None: nothing is written
        self.enabled = enabled
        self.slow_ms = slow_ms
        self._prefix = uuid.uuid4().hex[:8]
        self._next = 0
        self._items: OrderedDict[str, _Item] = OrderedDict()
        self.session: dict[str, Counts] = {}
        self._pending: dict[str, Counts] = {}
        self._latencies: dict[str, deque[float]] = {}
        self.by_source: dict[str, Counts] = {}  # this session's item counts by source
        self.edits_asked = 0  # next-edit requests answered, and their suggestions by kind:
        self.by_kind: dict[str, dict[str, int]] = {}  # {kind: {suggested, shown, accepted}}
        self._recent: deque[tuple[float, float, bool]] = deque(maxlen=RECENT)
        self._flushed = time.monotonic()

    def configure(self, enabled: bool, slow_ms: float) -> None:
        if self.enabled and not enabled:
            self._pending.clear()  # off means nothing more is written, counted or not
        self.enabled, self.slow_ms = enabled, slow_ms

    def _bump(self, language: str, **by: int) -> None:
        for table in (self.session, self._pending):
            counts = table.setdefault(language, Counts())
            for name, n in by.items():
                setattr(counts, name, getattr(counts, name) + n)

    def request(self, language: str, elapsed_ms: float, ok: bool) -> None:
        """An inline request answered after elapsed_ms; ok=False: it failed."""
        self._recent.append((time.monotonic(), elapsed_ms, ok))
        if not self.enabled:
            return
        self._bump(language or "unknown", requests=1, errors=0 if ok else 1)
        if ok:
            lang = language or "unknown"
            self._latencies.setdefault(lang, deque(maxlen=KEEP_LATENCIES)).append(elapsed_ms)
            for table in (self.session, self._pending):
                table[lang].latency_hist[bucket_of(elapsed_ms)] += 1
        self.maybe_flush()

    def issue(self, language: str, source: str = "model") -> str | None:
        """A new item's id (None with counting off: the item then carries no command)."""
        if not self.enabled:
            return None
        key = self._keep(_Item(language or "unknown", source))
        self._bump(language or "unknown", items=1)
        self._by_source(source, items=1)
        return key

    def edit_asked(self) -> None:
        self.edits_asked += 1

    def issue_edit(self, kind: str) -> str | None:
        """A next edit's id (None with counting off: it then carries no command)."""
        self._kind(kind, "suggested")
        return self._keep(_Item("", kind=kind)) if self.enabled else None

    def _keep(self, item: _Item) -> str:
        """A new id for item, kept among the last KEEP_ITEMS."""
        self._next += 1
        key = f"{self._prefix}-{self._next}"
        self._items[key] = item
        while len(self._items) > KEEP_ITEMS:
            self._items.popitem(last=False)
        return key

    def _kind(self, kind: str, what: str) -> None:
        counts = self.by_kind.setdefault(kind, dict.fromkeys(("suggested", "shown", "accepted"), 0))
        counts[what] += 1

    def next_edits(self) -> dict[str, Any]:
        """This session's next edits, for dllm/status."""
        return {"asked": self.edits_asked, "kinds": {k: dict(c) for k, c in self.by_kind.items()}}

    def _by_source(self, source: str, **by: int) -> None:
        counts = self.by_source.setdefault(source, Counts())
        for name, n in by.items():
            setattr(counts, name, getattr(counts, name) + n)

    def _item(self, key: str | None) -> _Item | None:
        return None if key is None or not self.enabled else self._items.get(key)

    def shown(self, key: str | None) -> bool:
        """The editor showed the item; True when this counted it (the first report)."""
        item = self._item(key)
        if item is None or item.shown:
            return False
        item.shown = True
        if item.kind is not None:
            self._kind(item.kind, "shown")
            return True
        self._bump(item.language, shown=1)
        self._by_source(item.source, shown=1)
        self.maybe_flush()
        return True

    def accepted(self, key: str | None) -> bool:
        """The item was accepted whole; an accepted item was shown, reported or not."""
        item = self._item(key)
        if item is None or item.accepted:
            return False
        self.shown(key)
        item.accepted = True
        if item.kind is not None:
            self._kind(item.kind, "accepted")
            return True
        self._bump(item.language, accepted=1)
        self._by_source(item.source, accepted=1)
        self.maybe_flush()
        return True

    def partially_accepted(self, key: str | None, length: int) -> bool:
        """Part of the item (`length` characters of it) was accepted. The item counts once;
        its characters are the longest length reported."""
        item = self._item(key)
        if item is None or item.kind is not None or length <= 0:
            return False
        self.shown(key)
        first, more = item.partial_len == 0, max(0, length - item.partial_len)
        item.partial_len = max(item.partial_len, length)
        self._bump(item.language, partial=1 if first else 0, partial_chars=more)
        self._by_source(item.source, partial=1 if first else 0, partial_chars=more)
        self.maybe_flush()
        return first

    def health(self) -> dict[str, Any]:
        """The backend's state from the recent requests: ok, slow, failing, or idle."""
        now = time.monotonic()
        recent = [r for r in self._recent if now - r[0] <= RECENT_S]
        errors = sum(1 for r in recent if not r[2])
        p50 = nearest_rank([r[1] for r in recent if r[2]], 50)
        out: dict[str, Any] = {
            "recent_requests": len(recent),
            "recent_errors": errors,
            "recent_p50_ms": None if p50 is None else round(p50, 1),
            "slow_ms": self.slow_ms,
        }
        if not recent:
            return {"state": "idle", "reason": "no recent requests", **out}
        if len(recent) >= MIN_RECENT and errors * 2 >= len(recent):
            return {"state": "failing", "reason": f"{errors} of {len(recent)} failed", **out}
        if p50 is not None and p50 > self.slow_ms:
            reason = f"median {p50:.0f} ms over {self.slow_ms:.0f} ms"
            return {"state": "slow", "reason": reason, **out}
        return {"state": "ok", "reason": f"{len(recent)} recent requests", **out}

    def summary(self) -> dict[str, Any]:
        """This session's counts, per language and in total, for dllm/status."""
        total = Counts()
        languages = {}
        for lang, counts in sorted(self.session.items()):
            total.add(counts)
            languages[lang] = counts.summary(list(self._latencies.get(lang, ())))
        every = [ms for lat in self._latencies.values() for ms in lat]
        return {
            "enabled": self.enabled,
            "file": None if self.path is None or not self.enabled else str(self.path),
            "languages": languages,
            "sources": {k: c.summary([]) for k, c in sorted(self.by_source.items())},
            "total": total.summary(every),
        }

    def maybe_flush(self) -> None:
        if time.monotonic() - self._flushed >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Add what is pending to the file (under its lock, so sessions add up)."""
        self._flushed = time.monotonic()
        if self.path is None or not self.enabled or not self._pending:
            return
        pending, self._pending = self._pending, {}
        with contextlib.suppress(OSError):  # a read-only home must not break completions
            merge_into(self.path, pending)


def read_file(path: Path) -> dict[str, Counts]:
    """The totals in a stats file ({} when it is missing or unreadable)."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    langs = raw.get("languages") if isinstance(raw, dict) else None
    if not isinstance(langs, dict):
        return {}
    return {str(k): Counts.from_json(v) for k, v in langs.items()}


def merge_into(path: Path, add: dict[str, Counts]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(path.with_suffix(".lock"), "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        totals = read_file(path)
        for lang, counts in add.items():
            totals.setdefault(lang, Counts()).add(counts)
        body = {
            "version": FILE_VERSION,
            "languages": {k: asdict(v) for k, v in sorted(totals.items())},
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".stats-")
        with os.fdopen(fd, "w") as out:
            json.dump(body, out, indent=1)
        os.replace(tmp, path)


def report(totals: dict[str, Counts]) -> str:
    """The totals as a table, for `dllm-infill-ls stats`."""
    if not totals:
        return "no completions counted yet"
    head = ("language", "requests", "errors", "shown", "accepted", "rate", "partial", "p50", "p95")
    rows: list[tuple[str, ...]] = [head]
    total = Counts()
    for lang, counts in sorted(totals.items()):
        total.add(counts)
        rows.append(_row(lang, counts))
    if len(totals) > 1:
        rows.append(_row("all", total))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.append(
        "latency: the upper edge of the bucket holding p50/p95 (ms); rate = accepted / shown"
    )
    return "\n".join(lines)


def _row(lang: str, counts: Counts) -> tuple[str, ...]:
    s = counts.summary()
    rate = "-" if s["acceptance_rate"] is None else f"{100 * s['acceptance_rate']:.0f}%"
    p50 = "-" if s["p50_ms"] is None else f"≤{s['p50_ms']:.0f}"
    p95 = "-" if s["p95_ms"] is None else f"≤{s['p95_ms']:.0f}"
    return (
        lang,
        str(counts.requests),
        str(counts.errors),
        str(counts.shown),
        str(counts.accepted),
        rate,
        str(counts.partial),
        p50,
        p95,
    )


def stats_main(argv: list[str]) -> int:
    """`dllm-infill-ls stats [--json] [--file PATH]`: the totals this machine's sessions kept."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="dllm-infill-ls stats",
        description="Completions shown and accepted per language, as counted on this machine.",
    )
    ap.add_argument("--json", action="store_true", help="print the totals as JSON")
    ap.add_argument("--file", type=Path, default=None, help=f"default: {state_file()}")
    a = ap.parse_args(argv)
    path = a.file or state_file()
    totals = read_file(path)
    if a.json:
        every = Counts()
        for counts in totals.values():
            every.add(counts)
        body = {
            "file": str(path),
            "languages": {k: v.summary() for k, v in sorted(totals.items())},
            "total": every.summary(),
        }
        print(json.dumps(body, indent=1))
    else:
        print(f"{path}\n{report(totals)}")
    return 0
