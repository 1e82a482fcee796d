"""Blocking work off the event loop on daemon threads: the model's load and the workspace
index's build. asyncio.to_thread's pool is joined by the interpreter at exit, so a load or a
build in progress kept the process alive for seconds after `exit`; a daemon thread does not."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def on_daemon_thread(fn: Callable[..., T], *args: Any, name: str = "dllm-work") -> T:
    """`fn(*args)` on a daemon thread: unlike asyncio.to_thread's pool, which the interpreter
    joins at exit, it never keeps the process alive after `exit`."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def run() -> None:
        value, error = None, None
        try:
            value = fn(*args)
        except BaseException as e:  # handed to the awaiting task, which re-raises it
            error = e
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: no one waits
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await future
