"""The streamed answer of a compatible route (`stream: true`): server-sent events in the route's
own shape (`Shape`: llama.cpp's `/infill`, OpenAI's `/v1/completions`).

A diffusion fill is committed across its span, but blocks finish left to right: each time a
block of a fill's row finishes, the scheduler's worker hands over the row's committed leading
text (batch.py: the text up to its first mask, which no later step changes), and the stream
sends what is new of it as an event. A piece is held back while a stop string or `n_indent`
could still cut it (compat.streamable), so the pieces of a fill join to the text a plain call
answers; when the rows are done, the rest of each fill and the final events follow.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..finish.secrets import find as find_secret
from ..hole import Prepared
from ..params import InfillResult
from ..scheduler import Ticket
from .compat import CompatAsk, streamable
from .work import Watch

Done = list[tuple[InfillResult, Ticket]]
T = TypeVar("T")


@dataclass(frozen=True)
class Shape(Generic[T]):
    """How a compatible route writes its answer: `build` makes it from the fills (no prepared
    ask and no fills for a call with nothing to write), `plain` is the body of a plain reply,
    `events` the final server-sent events of a streamed one (after the pieces `sent` already;
    `done`: end them with `data: [DONE]`, as OpenAI's do), `piece` the event of a new piece of
    the `index`-th fill while it decodes, and `n_indent` the indentation that ends a fill."""

    build: Callable[[CompatAsk, Prepared | None, Done], T]
    plain: Callable[[CompatAsk, T], Any]
    events: Callable[[CompatAsk, T, list[str]], list[dict[str, Any]]]
    done: bool
    piece: Callable[[CompatAsk, int, str], dict[str, Any]]
    n_indent: Callable[[CompatAsk], int]


class Stream:
    """One streamed call: `events()` runs its rows (`run`, given the watch that hears their
    progress) and yields its server-sent events; `done` holds the fills once they are."""

    def __init__(
        self,
        c: CompatAsk,
        shape: Shape[Any],
        run: Callable[[Watch], Awaitable[tuple[Prepared, Done]]],
    ) -> None:
        self.c, self.shape, self.run = c, shape, run
        self.done: Done = []
        self.sent = [""] * c.ask.candidates  # each fill's text streamed so far

    async def events(self) -> AsyncGenerator[str, None]:
        """The events; raises the rows' `Refusal` (the caller writes it as an error event)."""
        c, shape = self.c, self.shape
        yield ": decoding\n\n"  # an SSE comment: the headers go out now, not with the fill
        prepared: Prepared | None = None
        if not c.warm_only:
            pieces: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
            loop = asyncio.get_running_loop()

            def watch(i: int, text: str) -> None:  # on the scheduler's worker
                loop.call_soon_threadsafe(pieces.put_nowait, (i, text))

            work = asyncio.ensure_future(self.run(watch))
            try:
                async for i, text in _until(work, pieces):
                    if (piece := self._piece(i, text)) is not None:
                        yield event(shape.piece(c, i, piece))
            finally:
                work.cancel()  # a no-op once done; else the client went away: the rows stop
            prepared, self.done = work.result()
        for data in shape.events(c, shape.build(c, prepared, self.done), self.sent):
            yield event(data)
        if shape.done:
            yield "data: [DONE]\n\n"

    def _piece(self, i: int, text: str) -> str | None:
        """What is new of the `i`-th fill's leading text and safe to send (it is noted sent)."""
        kept = streamable(text, self.c.stop, self.shape.n_indent(self.c))
        # Up to the last word's end: a token is sent whole or not at all, and once whole, a fill
        # that looks like a credential sends no more (the final event holds it back: secrets.py).
        kept = kept[: max(kept.rfind(ch) for ch in _WORD_ENDS) + 1]
        if find_secret(kept) is not None:
            return None
        before = self.sent[i] if i < len(self.sent) else None
        if before is None or len(kept) <= len(before) or not kept.startswith(before):
            return None
        self.sent[i] = kept
        return kept[len(before) :]


_WORD_ENDS = " \t\n'\"`,;)]}"


async def _until(work: asyncio.Future[Any], queue: asyncio.Queue[T]) -> AsyncIterator[T]:
    """The queue's items as they come, until the work is done (its outcome is left to read)."""
    while not work.done():
        item = asyncio.ensure_future(queue.get())
        try:
            await asyncio.wait({work, item}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            item.cancel()  # a no-op once it has its item
        if item.done() and not item.cancelled():
            yield item.result()


def event(data: dict[str, Any]) -> str:
    """One server-sent event of JSON data."""
    return "data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n\n"
