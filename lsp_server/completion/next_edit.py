"""Next edits: from a document, its recent edits and the cursor to the one edit that follows.

`NextEdits.suggest` asks each of its `sources` for candidates (infill_engine.edits.Suggestion)
at once, waits for them at most `nextEdits.maxLatencyMs`, and lets the gate
(infill_engine.edits.suggestion.gate) show at most one: the surest over its kind's threshold,
and none when none is. After most edits nothing follows, so none is the common answer.

The sources, in `DEFAULT_SOURCES`:
* `structure`: infill_engine.edits.structure's rules (a rename's other references, call sites
  of a changed signature or of a changed call, the other half of a removed `#if`, lines of the
  same shape, the same replacement elsewhere, a deleted line's twin): no model, a few
  milliseconds, run in a worker thread.
* the dLLM's rewrite of the region around the cursor (`nextEdits.model`) and a hosted next-edit
  API (`nextEdits.hostedAddress`): edit_sources.py, sources of the same shape (an async function
  of an `EditAsk` and the settings), joined to structure by protocol/handlers.build_server. A
  source that fails or runs late is left out, never the request's failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from infill_engine.edits.history import Edit
from infill_engine.edits.structure import candidates
from infill_engine.edits.suggestion import Suggestion, gate

from ..options import Options
from ..workspace.documents import Document
from ..workspace.viewed import Excerpt

log = logging.getLogger("dllm-infill-ls")


@dataclass(frozen=True)
class EditAsk:
    """What every source reads: one document as it is now and where the cursor is."""

    uri: str
    text: str
    offset: int  # the cursor, a str offset into text
    language_id: str
    edits: Sequence[Edit]  # the document's recent edits, oldest first (History.edits())
    tree: Any | None  # its tree-sitter tree, None without a grammar
    viewed: Sequence[Excerpt] = ()  # other documents seen last, newest last (viewed.py)


Source = Callable[[EditAsk, Options], Awaitable[list[Suggestion]]]


async def structure(ask: EditAsk, options: Options) -> list[Suggestion]:
    """The structure tier's candidates (no model), found off the event loop (tens of
    milliseconds in a file of thousands of lines), so that the deadline holds and other
    requests are read meanwhile. The tree goes as a copy of the ask's (a tree is read on one
    thread at a time): a thread past the deadline runs on while the gate reads the ask's."""
    tree = ask.tree.copy() if ask.tree is not None else None
    return await asyncio.to_thread(
        candidates, ask.text, ask.edits, ask.language_id, ask.offset, tree
    )


DEFAULT_SOURCES: tuple[Source, ...] = (structure,)


class NextEdits:
    """The next-edit step: its sources, asked together, and the gate over what they find."""

    def __init__(self, sources: Sequence[Source] = DEFAULT_SOURCES) -> None:
        self.sources: list[Source] = list(sources)  # where the model and hosted tiers join

    async def suggest(
        self, doc: Document, offset: int, options: Options, viewed: Sequence[Excerpt] = ()
    ) -> Suggestion | None:
        """The one next edit to show at `offset` of `doc`, or None."""
        edits = doc.history.edits()
        if not edits or not self.sources:
            return None  # every source starts from the user's last edit
        ask = EditAsk(
            doc.uri, doc.text, offset, doc.language_id or "", edits, doc.syntax_tree(), viewed
        )
        found = await self.gather(ask, options)
        if not found:
            return None
        # off the event loop: the gate's syntax check parses what each suggestion changes
        return await asyncio.to_thread(
            gate, found, ask.text, options.next_edits.gate, ask.language_id, edits[-1], ask.tree
        )

    async def gather(self, ask: EditAsk, options: Options) -> list[Suggestion]:
        """Every source's candidates that came within nextEdits.maxLatencyMs; the rest are
        cancelled."""
        tasks = [asyncio.ensure_future(source(ask, options)) for source in self.sources]
        try:
            done, _ = await asyncio.wait(tasks, timeout=options.next_edits.max_latency_ms / 1000)
        finally:  # late, or the request cancelled ($/cancelRequest): none keeps running
            for task in tasks:
                task.cancel()
        found: list[Suggestion] = []
        for task, source in zip(tasks, self.sources, strict=True):
            if task not in done:
                log.info("next edits: %s ran past the deadline", _name(source))
            elif (error := task.exception()) is not None:
                log.warning("next edits: %s failed", _name(source), exc_info=error)
            else:
                found += task.result()
        return found


def _name(source: Source) -> str:
    return getattr(source, "__qualname__", None) or type(source).__name__
