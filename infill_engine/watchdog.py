"""`Watchdog`: a bound on the host-side work one request does inside a decode step.

A step is shared: the forward passes serve every row, but each row then runs code of its own on
the worker thread, and some of it comes with the request, such as the stop rule of its span plan,
which may come off the wire. Such code runs inside `Watchdog.guard()`; when it runs past
`bound_s`, the watchdog's thread raises `StepTimeout` in the worker thread (CPython's
`PyThreadState_SetAsyncExc`), the runner fails that row alone and the step goes on for the
others. The exception lands at the guarded code's next bytecode: pure Python (a scanner looping
for ever, say) is stopped; a single call into C code is stopped only once it returns.

The watcher costs nothing between steps: it sleeps until a guard is armed, then waits for the
deadline of the guard in force, and a guard armed while it already waits does not wake it.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

DEFAULT_BOUND_S = 2.0  # a stop rule takes milliseconds; seconds mean it will never end


class StepTimeout(RuntimeError):
    """A request's own work ran past the watchdog's bound inside a step."""


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    """Schedule `exc` in the thread (None: withdraw one scheduled and not yet raised)."""
    target = ctypes.c_ulong(thread_id)
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        target, ctypes.py_object(exc) if exc is not None else ctypes.py_object()
    )


class Watchdog:
    def __init__(self, bound_s: float = DEFAULT_BOUND_S) -> None:
        if not bound_s > 0:
            raise ValueError(f"bound_s must be > 0, got {bound_s!r}")
        self.bound_s = bound_s
        self.fired = 0  # guards that ran past the bound
        self._cond = threading.Condition()
        self._seq = itertools.count(1)
        # the guard in force: (thread id, deadline, its number); None between guards
        self._armed: tuple[int, float, int] | None = None
        self._fired_seq = 0  # the number of the last guard the watcher fired on
        self._idle = True  # the watcher waits for a guard with no timeout
        self._closed = False
        self._thread: threading.Thread | None = None

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Run the body under the bound; raises `StepTimeout` when it runs past it (also when
        the body finished just as the watcher fired)."""
        tid = threading.get_ident()
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._watch, name="dllm-watchdog")
                self._thread.daemon = True
                self._thread.start()
            seq = next(self._seq)
            self._armed = (tid, time.monotonic() + self.bound_s, seq)
            if self._idle:
                self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                self._armed = None
                fired = self._fired_seq == seq
            if fired:
                # The exception may still be pending (the body ended first): withdraw it, so
                # it cannot land outside this guard, and raise it here instead.
                _raise_in(tid, None)
                raise StepTimeout(f"ran past the watchdog's bound of {self.bound_s:g} s")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                armed = self._armed
                if armed is None or armed[2] == self._fired_seq:
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                    continue
                tid, deadline, seq = armed
                left = deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)  # a newer guard may be in force when it returns
                    continue
                self._fired_seq = seq
                self.fired += 1
                _raise_in(tid, StepTimeout)
