"""Inline completion: from a document and a cursor to the texts the editor shows as ghost text.

Order of work, cheapest first: language and size checks, then for automatic triggers the
snooze (snooze.py) and the cursor inside a comment or string (cursor.py: nothing there), the
typed-ahead cache, the debounce (automatic triggers only) with a staleness check after it.
Then the one decision of what is shown (infill_engine/decide.py), which says first whether the
model's fills could be shown at all: where they could not (an automatic trigger, an untrusted
model), no model runs and the drafts alone are decided on. Else the engine (backend.py) plans
the span, cuts the context and fills the candidates, here or in the engine service (a newer
request on the same document cancels an older one), and the decision finishes, ranks and gates
the fills with the drafts. What it chose is remembered for typing ahead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infill_engine import languages
from infill_engine.decide import Choice, Policy, Seen, decide, trusted
from infill_engine.drafts import Draft, gather
from infill_engine.edits.history import Edit
from infill_engine.edits.renames import Renames, renames
from infill_engine.finish import Around, Indent
from infill_engine.scheduler import Priority
from infill_engine.workspace.index import WorkspaceIndex

from ..engines.backend import Backend, Superseded
from ..engines.engine_client import Filled, Hole
from ..options import Options, decode_params
from ..workspace.crossfile import ChunkStore
from .cursor import in_comment_or_string
from .debounce import AdaptiveDebounce
from .snooze import Snooze
from .typeahead import TypeaheadCache


@dataclass(frozen=True)
class Ask:
    uri: str
    text: str  # the whole document
    offset: int  # the cursor, a str offset into text
    language_id: str
    invoked: bool  # the user asked explicitly (else: automatic, as they type)
    tree: Any | None = None  # the document's current tree-sitter tree, when it has a grammar
    indent: Indent | None = None  # the editor's formatting options, when it sent them
    edits: tuple[Edit, ...] = ()  # the document's recent edits, oldest first (History.edits())


def model_trusted(opts: Options) -> bool:
    """Whether the model's fills may be shown unasked (decide.trusted, drafts.trustModel)."""
    engine = opts.engine
    return trusted(engine.model, engine.address is not None, opts.drafts.trust_model)


def model_knows(opts: Options, language_id: str) -> bool:
    """Whether the model knows the document's language (languages.py: modelLanguages, else its
    card; a card is read once per model, languages.model_languages caches it)."""
    engine = opts.engine
    known = languages.model_languages(engine.model, engine.languages, engine.address is not None)
    return languages.knows(known, language_id)


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
        self.drafted_only = 0  # requests decided on the drafts alone, with no model pass

    def configure(self, opts: Options) -> None:
        self.debounce.base_ms = opts.completion.debounce_ms
        self.typeahead.clear()

    async def complete(self, ask: Ask, opts: Options) -> list[str]:
        wanted = opts.completion.languages
        if ask.language_id not in wanted and "*" not in wanted:
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

    def policy(self, ask: Ask, opts: Options) -> Policy:
        """How this request is decided (decide.py). With drafts off the model's fills are all
        there is, and they are shown as they were before drafts: trusted. In a language the
        model does not know (languages.py), its fills are never shown."""
        trust = model_trusted(opts)
        return Policy(
            not ask.invoked, trust or not opts.drafts.enabled, opts.drafts.gate, ask.indent,
            model_knows=model_knows(opts, ask.language_id),
        )  # fmt: skip

    async def _from_model(self, ask: Ask, opts: Options) -> list[str]:
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
        policy = self.policy(ask, opts)
        if not policy.model_shown and not drafting:
            return []  # the model's fills cannot be shown here, and there are no drafts
        # a name just renamed is the name to use (decide, step 0)
        renamed = renames(ask.text, ask.edits, ask.tree, ask.offset) if ask.edits else ()
        if not policy.model_shown:
            # None of the model's fills could be shown (an automatic trigger and an untrusted
            # model, or a language the model does not know): no model pass, the drafts alone,
            # from the document and the chunks, found and decided off the event loop (the
            # syntax check reads the whole document).
            python = ask.language_id == "python"  # Python's imports are read for Python alone

            def drafts_alone() -> list[Choice]:
                drafted = gather(ask.text, ask.offset, extra, found, python=python, renamed=renamed)
                seen = Seen.whole(
                    ask.text, ask.offset, ask.language_id, renamed=renamed, tree=ask.tree
                )
                return decide([], drafted, seen, policy)

            chosen = await asyncio.to_thread(drafts_alone)
            self.drafted_only += 1
        else:
            filled = await self._fill(ask, opts, extra, budget, found, renamed)
            if filled is None:
                return []
            results = filled.results
            self.debounce.record_latency(max(r.elapsed_ms for r in results))
            # the context the model saw; the syntax check reads the whole document
            before, after = ask.text[: ask.offset], ask.text[ask.offset :]
            prefix, suffix = ask.text[filled.start : ask.offset], ask.text[ask.offset : filled.stop]
            # a copy: the planning thread read the ask's (a tree is read on one thread at a time)
            around = Around(before, after, tree=ask.tree.copy() if ask.tree is not None else None)
            seen = Seen(around, prefix, suffix, ask.language_id, filled.kind, renamed)
            fills = [r.text for r in results]
            drafted = filled.drafts if drafting else ()
            # off the event loop: the syntax check of a long fill takes tens of milliseconds
            chosen = await asyncio.to_thread(decide, fills, drafted, seen, policy)
        for c in chosen[: self._limit(ask, opts)] if drafting else ():  # drafts' shown counts
            self.sources[c.source] = self.sources.get(c.source, 0) + 1
        self._sources[ask.uri] = {c.text: c.source for c in chosen}
        return [c.text for c in chosen]

    async def _fill(
        self,
        ask: Ask,
        opts: Options,
        extra: tuple[tuple[str, str], ...],
        budget: int,
        found: tuple[Draft, ...],
        renamed: Renames = (),
    ) -> Filled | None:
        """The model's fills of the hole, or None when a newer request took over or this one
        was cancelled while it ran."""
        cancel = threading.Event()
        priority: Priority = "invoked" if ask.invoked else "automatic"
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
            drafting=opts.drafts.enabled,
            renamed=renamed,
        )
        if (old := self._inflight.get(ask.uri)) is not None:
            old.set()  # a newer request on this document: the older one stops at its next pass
        self._inflight[ask.uri] = cancel
        try:
            filled = await self.backend.fill(hole)
        except Superseded:
            return None
        finally:
            if self._inflight.get(ask.uri) is cancel:
                del self._inflight[ask.uri]
        if any(r.stop_reason == "cancelled" for r in filled.results):
            return None
        return filled

    def source_of(self, uri: str, text: str) -> str:
        """Where the latest completion of `uri` that gave `text` got it ("model" unless a draft
        did; typed-ahead items are the rest of such a text and count as its source)."""
        for full, source in self._sources.get(uri, {}).items():
            if full.endswith(text):
                return source
        return "model"
