"""Inline completion: from a document and a cursor to the texts the editor shows as ghost text.

Order of work, cheapest first: language and size checks, the typed-ahead cache, the debounce
(automatic triggers only) with a staleness check after it, then the span plan (planner.py: the
hole's kind, span, stop rule and context budgets), the context, and the model: a newer request
on the same document cancels an older one. Model output then goes through finish.py (the text
steps, then the syntax check: nothing shown adds a syntax error), and is remembered for typing
ahead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infill_engine.context import build_context
from infill_engine.planner import SpanPlan
from infill_engine.scheduler import Priority

from .backend import Backend, Superseded
from .debounce import AdaptiveDebounce
from .finish import finish
from .options import Options, infill_params, span_plan
from .syntax import Around
from .typeahead import TypeaheadCache


@dataclass(frozen=True)
class Ask:
    uri: str
    text: str  # the whole document
    offset: int  # the cursor, a str offset into text
    language_id: str
    invoked: bool  # the user asked explicitly (else: automatic, as they type)
    tree: Any | None = None  # the document's current tree-sitter tree, when it has a grammar


class Completer:
    def __init__(self, backend: Backend, log: Callable[[str], None]) -> None:
        self.backend = backend
        self.log = log
        self.typeahead = TypeaheadCache()
        self.debounce = AdaptiveDebounce()
        self._generation: dict[str, int] = {}
        self._inflight: dict[str, threading.Event] = {}

    def configure(self, opts: Options) -> None:
        self.debounce.base_ms = opts.completion.debounce_ms
        self.typeahead.clear()

    async def complete(self, ask: Ask, opts: Options) -> list[str]:
        if ask.language_id not in opts.completion.languages:
            return []
        if len(ask.text) > opts.context.max_document_chars:
            self.log(f"{ask.uri}: {len(ask.text)} chars is over the limit; no completion")
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

    @staticmethod
    def _limit(ask: Ask, opts: Options) -> int:
        return opts.completion.candidates if ask.invoked else 1

    async def _from_model(self, ask: Ask, opts: Options) -> list[str]:
        hole = span_plan(
            opts, self.backend.ready_engine(), ask.text, ask.offset, ask.language_id, tree=ask.tree
        )
        ctx = build_context(
            ask.text,
            ask.offset,
            self.backend.tokenize,
            hole.prefix_tokens,
            hole.suffix_tokens,
        )
        params = [infill_params(opts.decode, span) for span in self._spans(hole, ask, opts)]
        cancel = threading.Event()
        if (old := self._inflight.get(ask.uri)) is not None:
            old.set()  # a newer request on this document: the older one stops at its next pass
        self._inflight[ask.uri] = cancel
        try:
            priority: Priority = "invoked" if ask.invoked else "automatic"
            results = await self.backend.infill_many(
                ctx.prefix, ctx.suffix, params, cancel, hole, priority=priority, ids=ctx.ids
            )
        except Superseded:
            return []
        finally:
            if self._inflight.get(ask.uri) is cancel:
                del self._inflight[ask.uri]
        self.debounce.record_latency(max(r.elapsed_ms for r in results))
        # The syntax check reads the whole document, not the model's trimmed window.
        document = Around(ask.text[: ask.offset], ask.text[ask.offset :])
        out: list[str] = []
        for r in results:
            if r.stop_reason == "cancelled":
                return []
            text = finish(r.text, ctx.prefix, ctx.suffix, ask.language_id, document=document)
            if text and text not in out:
                out.append(text)
        return out

    @staticmethod
    def _spans(span_plan: SpanPlan, ask: Ask, opts: Options) -> list[int]:
        """Initial spans to try: the plan's (or the user's fixed span), and for an explicit
        request also longer and shorter ones; each may still grow while its construct is open."""
        cap = opts.decode.max_span
        base = opts.decode.span or span_plan.span
        if not ask.invoked or opts.completion.candidates == 1:
            return [max(1, min(base, cap))]
        spans: list[int] = []
        for s in (base, base * 2, base // 2):
            s = max(1, min(s, cap))
            if s not in spans:
                spans.append(s)
        return spans[: opts.completion.candidates]
