"""Context from other files: a bounded store of chunks of the workspace's recently opened, edited
and saved documents (and of text the editor pushes, say yanked), and the choice, at completion
time, of the chunks that bear on the code at the cursor.

- A chunk is at most `chunk_lines` (64) lines; the store holds at most `max_chunks` (16), the
  oldest leaving first (llama.vim's ring of 16 × 64 lines).
- Opening a document stores its head (imports and the first definitions); an edit, the chunk
  centred on the edited line; a save, the chunk around the last edit; a push, the text pushed.
- A chunk whose set of lines is nearly that of a stored one (Jaccard over `similar`, 0.9)
  replaces it: typing in one place keeps one chunk of that place, refreshed.
- Choosing: the identifiers of the lines before the cursor (`near_lines`) score each chunk by
  the identifiers they share, each weighted by how few chunks hold it (a name every chunk has
  says nothing); chunks that share none are not sent, nor the current document's own chunks,
  nor chunks of another workspace folder. The best come last (nearest the prefix, where the
  engine's budget keeps them) within about `budget_tokens` worth of characters: the engine
  cuts to the exact token budget (context.build_extra).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from infill_engine.drafts.idents import IDENT, jaccard
from infill_engine.drafts.nearby import row_start

CHUNK_LINES = 64
MAX_CHUNKS = 16
SIMILAR = 0.9  # line-set Jaccard over which a new chunk replaces a stored one
NEAR_LINES = 24  # lines before the cursor whose identifiers ask for chunks
CHARS_PER_TOKEN = 4  # code runs 3-4 characters a token: what to send for a token budget
MAX_PUSH_CHARS = 64 * 1024
# Words of most languages' syntax and the commonest names: shared by nearly any two pieces of
# code, so they relate nothing.
_COMMON_WORDS = (
    "and are args as assert async await break case catch class const continue def default del "
    "elif else enum except export extends false final finally fn for from func function get "
    "global impl import int interface kwargs let lambda len list new nil none not null pass "
    "print private protected pub public raise return self set static str struct super switch "
    "this throw true try type use var void while with yield"
)
_COMMON = frozenset(_COMMON_WORDS.split())


def identifiers(text: str) -> frozenset[str]:
    """The names in text worth matching: three characters or more, not syntax."""
    return frozenset(w for w in IDENT.findall(text) if len(w) > 2 and w.lower() not in _COMMON)


def _line_set(text: str) -> frozenset[str]:
    return frozenset(s for line in text.splitlines() if (s := line.strip()))


def workspace_of(uri: str | None, roots: Sequence[str]) -> str | None:
    """The longest workspace folder URI that holds `uri`, or None."""
    if uri is None:
        return None
    held = [r for r in roots if uri == r or uri.startswith(r.rstrip("/") + "/")]
    return max(held, key=len, default=None)


def roots_of(workspace: Any) -> tuple[str, ...]:
    """The workspace folders' URIs of a pygls workspace, else its root URI."""
    folders = tuple(f.uri for f in (getattr(workspace, "folders", None) or {}).values())
    root = getattr(workspace, "root_uri", None)
    return folders or ((root,) if isinstance(root, str) else ())


def display_name(uri: str | None, roots: Sequence[str]) -> str:
    """A chunk's header: its path within the workspace folder, else its file name."""
    if uri is None:
        return ""
    root = workspace_of(uri, roots)
    if root is not None and uri != root:
        return unquote(uri[len(root.rstrip("/")) + 1 :])
    path = unquote(urlparse(uri).path) or uri
    return path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Chunk:
    uri: str | None  # the document it came from; None: pushed without one
    name: str  # its header (display_name)
    text: str
    start_line: int  # where it starts in its document (0 when pushed)
    lines: frozenset[str]  # its stripped, non-blank lines (never none): what jaccard compares
    names: frozenset[str]  # its identifiers: what relevance compares
    source: str  # "open", "edit", "save", "push"


@dataclass(frozen=True)
class Choice:
    """The chunks chosen for one completion, the least relevant first, and why."""

    chunks: tuple[Chunk, ...]
    shared: tuple[str, ...]  # the identifiers the chosen chunks share with the cursor's lines
    ms: float  # the time the choice took

    @property
    def extra(self) -> tuple[tuple[str, str], ...]:
        """As the engine takes them (engine_client.Hole.extra): (header, text)."""
        return tuple((c.name, c.text) for c in self.chunks)


def window(text: str, line: int, size: int) -> tuple[int, str]:
    """The `size` lines of text centred on `line`, inside the text: (first line, text)."""
    lines = text.splitlines(keepends=True)
    first = max(0, min(line - size // 2, len(lines) - size))
    return first, "".join(lines[first : first + size])


@dataclass
class ChunkStore:
    max_chunks: int = MAX_CHUNKS
    chunk_lines: int = CHUNK_LINES
    similar: float = SIMILAR
    near_lines: int = NEAR_LINES
    roots: tuple[str, ...] = ()  # the workspace folders' URIs
    chunks: list[Chunk] = field(default_factory=list)  # the oldest first
    last: Choice | None = None  # the latest choice, for dllm/status
    _edited: dict[str, int] = field(default_factory=dict)  # the last edited line per document

    # -- what goes in ------------------------------------------------------------------------------
    def add(self, uri: str | None, text: str, start_line: int = 0, source: str = "push") -> bool:
        """Store `text` (its first `chunk_lines` lines) as a chunk; a near-duplicate of a stored
        chunk replaces it, and past `max_chunks` the oldest leaves. False if nothing to store."""
        text = "".join(text.splitlines(keepends=True)[: self.chunk_lines])
        lines = _line_set(text)
        if not lines:
            return False
        chunk = Chunk(
            uri, display_name(uri, self.roots), text, start_line, lines, identifiers(text), source
        )
        self.chunks = [c for c in self.chunks if jaccard(c.lines, lines) <= self.similar]
        self.chunks.append(chunk)
        del self.chunks[: max(0, len(self.chunks) - self.max_chunks)]
        return True

    def opened(self, uri: str, text: str) -> None:
        self.add(uri, text, 0, "open")

    def edited(self, uri: str, text: str, line: int) -> None:
        self._edited[uri] = line
        first, part = window(text, line, self.chunk_lines)
        self.add(uri, part, first, "edit")

    def saved(self, uri: str, text: str) -> None:
        first, part = window(text, self._edited.get(uri, 0), self.chunk_lines)
        self.add(uri, part, first, "save")

    def pushed(self, text: str, uri: str | None = None) -> bool:
        return self.add(uri, text[:MAX_PUSH_CHARS], 0, "push")

    def closed(self, uri: str) -> None:
        self._edited.pop(uri, None)  # its chunks stay: a file just left is still context

    # -- what comes out ----------------------------------------------------------------------------
    def choose(self, uri: str, text: str, offset: int, budget_tokens: int) -> Choice:
        """The chunks for a completion at `offset` of the document `uri`, the best last."""
        t0 = time.perf_counter()
        lo = row_start(text, offset, self.near_lines - 1)  # the cursor's row and those above
        wanted = identifiers(text[lo:offset])
        home = workspace_of(uri, self.roots)
        pool = [
            c
            for c in self.chunks
            if c.uri != uri and (c.uri is None or workspace_of(c.uri, self.roots) == home)
        ]
        picked: list[tuple[float, int, Chunk]] = []
        shared: set[str] = set()
        if wanted and pool and budget_tokens > 0:
            held = {w: sum(w in c.names for c in pool) for w in wanted}
            for age, c in enumerate(pool):
                common = wanted & c.names
                score = sum(math.log(1 + len(pool) / held[w]) for w in common)
                if score > 0:
                    picked.append((score, age, c))  # a tie goes to the newer chunk
            picked.sort(key=lambda s: (s[0], s[1]), reverse=True)
            room, kept = budget_tokens * CHARS_PER_TOKEN, []
            for _, _, c in picked:
                if room <= 0:
                    break
                kept.append(c)
                shared |= wanted & c.names
                room -= len(c.text) + len(c.name) + 4
            chosen = tuple(reversed(kept))
        else:
            chosen = ()
        choice = Choice(chosen, tuple(sorted(shared)), (time.perf_counter() - t0) * 1000)
        self.last = choice
        return choice

    def status(self) -> dict[str, Any]:
        last = self.last
        return {
            "chunks": [
                {"name": c.name, "line": c.start_line, "source": c.source} for c in self.chunks
            ],
            "last": None
            if last is None
            else {
                "chosen": [c.name for c in last.chunks],
                "shared": list(last.shared[:32]),
                "ms": round(last.ms, 3),
            },
        }


def edited_line(params: Any) -> int | None:
    """The line a didChange's last change starts on (raw params), or None for a whole text."""
    changes = params.get("contentChanges") if isinstance(params, dict) else None
    last = changes[-1] if isinstance(changes, list) and changes else None
    rng = last.get("range") if isinstance(last, dict) else None
    start = rng.get("start") if isinstance(rng, dict) else None
    line = start.get("line") if isinstance(start, dict) else None
    return line if type(line) is int and line >= 0 else None
