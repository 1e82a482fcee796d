"""Waiting between tries, for every engine client: `Backoff`, the delay that doubles with each
failure in a row (or what a server's Retry-After asked for, bounded: untrusted.retry_after_s),
and `Retry`, the one loop that tries again after each delay until a try ends it or the client
closes. link.py's `Link` reconnects to the engine service with it, hosted_fim.py's client
waits for a hosted API at start-up with it; hosted_fim.py pauses its requests with `Backoff`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .untrusted import retry_after_s


@dataclass
class Backoff:
    """A delay that doubles, from `first` up to `longest`, with each failure in a row."""

    first: float
    longest: float
    failures: int = 0

    def next(self) -> float:
        """The delay after one more failure."""
        delay = min(self.longest, self.first * 2.0 ** min(self.failures, 64))
        self.failures += 1
        return delay

    def after(self, retry_after: str | None) -> float:
        """The pause a server asked for (its Retry-After, bounded), else the next delay."""
        wait = retry_after_s(retry_after)
        return self.next() if wait is None else wait

    def reset(self) -> None:
        self.failures = 0


class Retry:
    """Tries again in a task of its own, at most one at a time: wait the next delay of a fresh
    `backoff()`, then `attempt()`, until the attempt returns True (over: it worked, or it never
    will), `done()` is true (checked before each wait and after it), or `stop()`, which cancels
    the wait or the try in progress. `sleep` waits a delay (asyncio.sleep; a test's own)."""

    def __init__(
        self,
        attempt: Callable[[], Awaitable[bool]],
        backoff: Callable[[], Backoff],
        done: Callable[[], bool] = lambda: False,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.attempt, self.backoff, self.done, self.sleep = attempt, backoff, done, sleep
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether a loop is waiting or trying now."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the loop on the running event loop, unless one runs already."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _loop(self) -> None:
        backoff = self.backoff()
        while not self.done():
            await self.sleep(backoff.next())
            if self.done() or await self.attempt():
                return
