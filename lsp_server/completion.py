"""Inline completion: from a document and a cursor to the texts the editor shows as ghost text.

Order of work, cheapest first: language and size checks, the typed-ahead cache, the debounce
(automatic triggers only) with a staleness check after it, then the model: a newer request on
the same document cancels an older one. Model output then goes through post-processing and a
syntax-checked truncation, and is remembered for typing ahead.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from infill_engine.engine import auto_span

from . import syntax
from .backend import Backend, Superseded
from .context import Context, build_context
from .debounce import AdaptiveDebounce
from .options import Options, infill_params
from .postprocess import postprocess
from .typeahead import TypeaheadCache

_CUT = re.compile(r"\w+|\S")  # ends of words and symbols: where a single line may be cut


@dataclass(frozen=True)
class Ask:
    uri: str
    text: str  # the whole document
    offset: int  # the cursor, a str offset into text
    language_id: str
    invoked: bool  # the user asked explicitly (else: automatic, as they type)


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
        # The plan needs only the cursor's own line, so it comes before the context: the span
        # decides how much context the model can take at all.
        near = Context(ask.text[max(0, ask.offset - 4000) : ask.offset],
                       ask.text[ask.offset : ask.offset + 4000], 0, 0)  # fmt: skip
        spans = self._spans(near, ask, opts)
        prefix_budget, suffix_budget = self._budgets(max(spans), opts)
        ctx = build_context(
            ask.text, ask.offset, self.backend.token_spans, prefix_budget, suffix_budget
        )
        params = [infill_params(opts.decode, span) for span in spans]
        cancel = threading.Event()
        if (old := self._inflight.get(ask.uri)) is not None:
            old.set()  # a newer request on this document: the older one stops at its next pass
        self._inflight[ask.uri] = cancel
        try:
            results = await self.backend.infill_many(ctx.prefix, ctx.suffix, params, cancel)
        except Superseded:
            return []
        finally:
            if self._inflight.get(ask.uri) is cancel:
                del self._inflight[ask.uri]
        self.debounce.record_latency(max(r.elapsed_ms for r in results))
        out: list[str] = []
        for r in results:
            if r.stop_reason == "cancelled":
                return []
            text = postprocess(r.text, ctx.prefix, ctx.suffix)
            if text is not None:
                text = fit_syntax(ctx, text, ask.language_id)
            if text and text.strip() and text not in out:
                out.append(text)
        return out

    def _budgets(self, span: int, opts: Options) -> tuple[int, int]:
        """Context budgets within what the model can see beside the span: tokenizing context the
        engine would trim anyway is wasted time on every keystroke."""
        room = max(0, self.backend.ready_engine().args.max_positions - span)
        want_pre, want_suf = opts.context.prefix_tokens, opts.context.suffix_tokens
        if want_pre + want_suf <= room:
            return want_pre, want_suf
        suffix = min(want_suf, max(room // 4, room - want_pre))  # as the engine's fit_context
        return min(want_pre, room - suffix), suffix

    @staticmethod
    def _spans(ctx: Context, ask: Ask, opts: Options) -> list[int]:
        """Span budgets to try: the plan, and for an explicit request also longer and shorter."""
        cap = opts.decode.max_span
        base = opts.decode.span or auto_span(ctx.prefix, ctx.suffix, cap)
        if not ask.invoked or opts.completion.candidates == 1:
            return [min(base, cap)]
        spans: list[int] = []
        for s in (base, base * 2, base // 2):
            s = max(1, min(s, cap))
            if s not in spans:
                spans.append(s)
        return spans[: opts.completion.candidates]


def fit_syntax(ctx: Context, text: str, language_id: str) -> str:
    """The longest cut of text that leaves no more syntax errors than the other cuts, or "" when
    even that cut has more errors than the window without any insertion: nothing shown may break
    the document.

    Cuts are at line ends and, on the first line, at word ends. The window (prefix + suffix) may
    not parse on its own, so this compares error counts rather than asking for zero errors.
    """
    if syntax.parser_for(language_id) is None:
        return text
    before = syntax.error_count(ctx.prefix + ctx.suffix, language_id)
    cuts = [m.end() for m in _CUT.finditer(text.split("\n", 1)[0])]
    cuts += [i for i, c in enumerate(text) if c == "\n" and i > 0]
    cuts = sorted(set(cuts) | {len(text)})[-24:]
    best, best_errors = text, None
    for cut in reversed(cuts):  # longest first: ties keep the longer text
        errors = syntax.error_count(ctx.prefix + text[:cut] + ctx.suffix, language_id)
        if errors is None:
            return text
        if best_errors is None or errors < best_errors:
            best, best_errors = text[:cut], errors
        if errors == 0:
            break
    if before is not None and best_errors is not None and best_errors > before:
        return ""
    return best
