"""Inline completion: from a document and a cursor to the texts the editor shows as ghost text.

Order of work, cheapest first: language and size checks, then for automatic triggers the
snooze (snooze.py) and the cursor inside a comment or string (cursor.py: nothing there), the
typed-ahead cache, the debounce
(automatic triggers only) with a staleness check after it, then the engine (backend.py): it
plans the span (the hole's kind, span, stop rule and context budgets), cuts the context and
fills the candidates, here or in the engine service; a newer request on the same document
cancels an older one. Model output then goes through finish.py (the text
steps, then the syntax check: nothing shown adds a syntax error), and is remembered for typing
ahead. An automatic completion keeps to one line except where the planner saw an empty
block or body (BODY_KINDS); an invoked one may run over several lines.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infill_engine.drafts import GATE, Draft, typed_before
from infill_engine.drafts.rank import choose, finished
from infill_engine.scheduler import Priority

from .crossfile import ChunkStore
from .cursor import in_comment_or_string
from .debounce import AdaptiveDebounce
from .engines.backend import Backend, Superseded
from .engines.engine_client import Hole
from .finish import finish
from .options import Options, decode_params
from .postprocess import Indent
from .snooze import Snooze
from .syntax import Around
from .typeahead import TypeaheadCache
from .workspace_index import WorkspaceIndex


@dataclass(frozen=True)
class Ask:
    uri: str
    text: str  # the whole document
    offset: int  # the cursor, a str offset into text
    language_id: str
    invoked: bool  # the user asked explicitly (else: automatic, as they type)
    tree: Any | None = None  # the document's current tree-sitter tree, when it has a grammar
    indent: Indent | None = None  # the editor's formatting options, when it sent them


# Planned hole kinds (planner.kinds) where an automatic completion may run over several lines.
BODY_KINDS = frozenset({"block_body", "function_body", "empty_body"})


class Completer:
    def __init__(self, backend: Backend, log: Callable[[str], None]) -> None:
        self.backend = backend
        self.log = log
        self.typeahead = TypeaheadCache()
        self.debounce = AdaptiveDebounce()
        self._generation: dict[str, int] = {}
        self._inflight: dict[str, threading.Event] = {}
        self.snooze = Snooze()
        self.crossfile = ChunkStore()  # other files' chunks (crossfile.py)
        self.workspace: WorkspaceIndex | None = None  # the workspace's lines, for drafts
        self.sources: dict[str, int] = {}  # items shown, by source ("model", "document", ...)
        self._sources: dict[str, dict[str, str]] = {}  # uri -> the latest items' sources

    def configure(self, opts: Options) -> None:
        self.debounce.base_ms = opts.completion.debounce_ms
        self.typeahead.clear()

    async def complete(self, ask: Ask, opts: Options) -> list[str]:
        if ask.language_id not in opts.completion.languages:
            return []
        if len(ask.text) > opts.context.max_document_chars:
            self.log(f"{ask.uri}: {len(ask.text)} chars is over the limit; no completion")
            return []
        if not ask.invoked and (
            self.snooze.remaining_s() > 0 or in_comment_or_string(ask.tree, ask.text, ask.offset)
        ):
            return []
        before, after = ask.text[: ask.offset], ask.text[ask.offset :]
        cached = self.typeahead.lookup(ask.uri, before, after)
        if cached:
            return cached[: self._limit(ask, opts)]
        generation = self._generation.get(ask.uri, 0) + 1
        self._generation[ask.uri] = generation
        if not ask.invoked:
            await self.debounce.wait()
            if self._generation.get(ask.uri) != generation:
                return []  # the user typed on while we waited
        texts = await self._from_model(ask, opts)
        self.typeahead.remember(ask.uri, before, after, texts)
        return texts[: self._limit(ask, opts)]

    def forget(self, uri: str) -> None:
        if (old := self._inflight.pop(uri, None)) is not None:
            old.set()
        self.typeahead.clear(uri)
        self._generation.pop(uri, None)
        self._sources.pop(uri, None)

    @staticmethod
    def candidates(invoked: bool, opts: Options) -> int:
        """Fills to ask for: for an explicit request the planned span, twice and half of it
        (request.candidate_spans), at most `candidates`; as the user types, one."""
        return opts.completion.candidates if invoked else 1

    def _limit(self, ask: Ask, opts: Options) -> int:
        return self.candidates(ask.invoked, opts)

    async def _from_model(self, ask: Ask, opts: Options) -> list[str]:
        cancel = threading.Event()
        priority: Priority = "invoked" if ask.invoked else "automatic"
        ctx = opts.context
        budget = ctx.cross_file_tokens if ctx.cross_file else 0
        extra = self.crossfile.choose(ask.uri, ask.text, ask.offset, budget).extra if budget else ()
        drafting = opts.drafts.enabled
        found: tuple[Draft, ...] = ()
        if drafting and self.workspace is not None and opts.drafts.workspace:
            # off the event loop: a large workspace takes some milliseconds
            found = tuple(
                await asyncio.to_thread(self.workspace.drafts, ask.uri, ask.text, ask.offset)
            )
        hole = Hole(
            ask.text,
            ask.offset,
            language_id=ask.language_id,
            priority=priority,
            candidates=self.candidates(ask.invoked, opts),
            prefix_tokens=opts.context.prefix_tokens,
            suffix_tokens=opts.context.suffix_tokens,
            params=decode_params(opts.decode),
            cancel=cancel,
            tree=ask.tree,
            extra=extra,
            extra_tokens=budget,
            drafts=found,
            drafting=drafting,
        )
        if (old := self._inflight.get(ask.uri)) is not None:
            old.set()  # a newer request on this document: the older one stops at its next pass
        self._inflight[ask.uri] = cancel
        try:
            filled = await self.backend.fill(hole)
        except Superseded:
            return []
        finally:
            if self._inflight.get(ask.uri) is cancel:
                del self._inflight[ask.uri]
        results = filled.results
        self.debounce.record_latency(max(r.elapsed_ms for r in results))
        # The syntax check reads the whole document, not the model's trimmed window.
        document = Around(ask.text[: ask.offset], ask.text[ask.offset :])
        prefix, suffix = filled.context(hole)
        one_line = not ask.invoked and filled.kind not in BODY_KINDS
        fills: list[str] = []
        for r in results:
            if r.stop_reason == "cancelled":
                return []
            text = finish(
                r.text,
                prefix,
                suffix,
                ask.language_id,
                document=document,
                one_line=one_line,
                indent=ask.indent,
            )
            if text and text not in fills:
                fills.append(text)
        if not drafting:
            return fills
        drafts = finished(filled.drafts, prefix, suffix, ask.language_id, document)
        trust = opts.drafts.trust_model
        if trust is None:
            trust = opts.engine.model != "builtin" or opts.engine.address is not None
        gate = GATE if opts.drafts.gate is None else opts.drafts.gate
        typed = typed_before(ask.text, ask.offset)
        chosen = choose(fills, drafts, not ask.invoked, gate, trust, typed=typed)
        for c in chosen[: self._limit(ask, opts)]:
            self.sources[c.source] = self.sources.get(c.source, 0) + 1
        self._sources[ask.uri] = {c.text: c.source for c in chosen}
        return [c.text for c in chosen]

    def source_of(self, uri: str, text: str) -> str:
        """Where the latest completion of `uri` that gave `text` got it ("model" unless a draft
        did; typed-ahead items are the rest of such a text and count as its source)."""
        for full, source in self._sources.get(uri, {}).items():
            if full.endswith(text):
                return source
        return "model"
