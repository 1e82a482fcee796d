"""The HTTP front's request slots: who holds them, and who gives one up when they run out.

A request holds a slot from its headers to its answer (a stream until its last event): at most
`total` in all and `per_peer` per client address. A client that sends its headers and then
stalls its body would hold its slots for the body's whole deadline (10 s), and one client with
the token could take them all, so that every other client got 503 meanwhile. So when a request
finds no slot (the front is full, or its own address holds `per_peer`), the request whose body
has been arriving the longest, for at least `stall_s`, gives its slot up and is answered 408:
its own address's first, else anyone's. Only when no body is stalled is the newcomer refused
(503 `busy`). A slot whose body has arrived is never taken back: that is work under way.

Addresses are the client's IP. Every client on the same machine shares loopback's, so the
eviction, not the per-address bound, is what keeps a stalled local client from starving the
editors beside it; the bound keeps one remote address to a share of the front.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from .work import Refusal

STALL_S = 1.0  # a body arriving for longer than this may be evicted when the slots run out


class Slot:
    """One request's place. `evicted` resolves when the place is taken back while the body is
    still arriving; `arrived()` marks the body in, after which it never is."""

    def __init__(self, slots: Slots, peer: str) -> None:
        self.slots = slots
        self.peer = peer
        self.started = time.monotonic()
        self.arriving = True
        self.held = True
        self.evicted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def arrived(self) -> None:
        self.arriving = False
        self.slots.arriving.pop(self, None)

    def release(self) -> None:
        """Give the place back (idempotent: an evicted slot gave it back already)."""
        if not self.held:
            return
        self.held = False
        self.arrived()
        self.slots.held -= 1
        self.slots.by_peer[self.peer] -= 1
        if self.slots.by_peer[self.peer] <= 0:
            del self.slots.by_peer[self.peer]


class Slots:
    """`take(peer)` a slot or raise `Refusal("busy")`; written on the event loop only."""

    def __init__(self, total: int, per_peer: int, stall_s: float = STALL_S) -> None:
        if total < 1 or per_peer < 1:
            raise ValueError("the HTTP front needs at least one slot, and one per client")
        self.total = total
        self.per_peer = per_peer
        self.stall_s = stall_s
        self.held = 0
        self.by_peer: Counter[str] = Counter()
        self.arriving: dict[Slot, None] = {}  # insertion order: the oldest first

    def hold(self, peer: str) -> Slot:
        """A place for a request admitted already (a stream, once its response has started):
        past the bounds if need be, its body in."""
        slot = Slot(self, peer)
        self.held += 1
        self.by_peer[peer] += 1
        slot.arriving = False
        return slot

    def take(self, peer: str) -> Slot:
        own_full = self.by_peer[peer] >= self.per_peer
        if own_full or self.held >= self.total:
            victim = self._stalled(peer if own_full else None)
            if victim is None:
                if own_full:
                    limit = self.per_peer
                    raise Refusal("busy", f"this client already has {limit} requests in flight")
                raise Refusal("busy", f"{self.total} HTTP requests already in flight")
            self._evict(victim)
        slot = Slot(self, peer)
        self.held += 1
        self.by_peer[peer] += 1
        self.arriving[slot] = None
        return slot

    def _stalled(self, peer: str | None) -> Slot | None:
        """The longest-arriving body of `peer` (of anyone when None), if it is past stall_s."""
        cutoff = time.monotonic() - self.stall_s
        for slot in self.arriving:
            if slot.started > cutoff:
                return None  # the rest arrived later still
            if peer is None or slot.peer == peer:
                return slot
        return None

    def _evict(self, slot: Slot) -> None:
        slot.release()
        if not slot.evicted.done():
            slot.evicted.set_result(None)
