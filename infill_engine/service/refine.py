"""The refine call, the same for every front (the msgpack `refine` message, `POST /v2/refine`):
the selection is scored in one pass (`Engine.refine`), its least confident tokens are remasked
and re-predicted as a row of the running batch, at command priority, beside the completions."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..params import InfillParams
from ..scheduler import Scheduler, SchedulerError
from .wire import BadRequest, parse_params
from .work import Refusal

log = logging.getLogger("infill_engine.service")


@dataclass(frozen=True)
class RefineAsk:
    prefix: str
    text: str  # the selection: what is re-predicted
    suffix: str
    fraction: float  # of its tokens remasked, in (0, 1]
    params: InfillParams


def parse_refine(msg: Mapping[str, Any]) -> RefineAsk:
    """The call's fields (BadRequest names the one that is wrong)."""
    texts = [msg.get(k, "") for k in ("prefix", "text", "suffix")]
    if not all(isinstance(t, str) for t in texts):
        raise BadRequest("prefix, text and suffix must be strings")
    if not texts[1]:
        raise BadRequest("text must not be empty")
    fraction = msg.get("fraction", 0.25)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise BadRequest("fraction must be a number in (0, 1]")
    if not 0 < fraction <= 1:
        raise BadRequest("fraction must be a number in (0, 1]")
    prefix, text, suffix = texts
    return RefineAsk(prefix, text, suffix, float(fraction), parse_params(msg.get("params")))


def can_refine(scheduler: Scheduler) -> bool:
    return hasattr(scheduler.engine, "refine")


async def run_refine(
    scheduler: Scheduler, ask: RefineAsk, cancel: threading.Event
) -> dict[str, Any]:
    """The refined selection as the reply's result map; raises `Refusal`."""
    if not can_refine(scheduler):
        raise Refusal("unknown_method", "this engine cannot refine")
    engine: Any = scheduler.engine
    try:
        r = await asyncio.to_thread(
            engine.refine, ask.prefix, ask.text, ask.suffix, ask.fraction, ask.params, cancel,
            scheduler,
        )  # fmt: skip
    except ValueError as e:
        raise Refusal("bad_request", str(e)[:300]) from None
    except SchedulerError as e:
        raise Refusal(e.code, str(e)) from None
    except Exception as e:
        log.error("a refine failed", exc_info=e)
        raise Refusal("internal", f"{type(e).__name__}: {e}"[:300]) from None
    if r.stop_reason == "cancelled":
        raise Refusal("cancelled", f"cancelled after {r.nfe} passes")
    return {
        "text": r.text,
        "remasked": r.remasked,
        "changed": r.changed,
        "nfe": r.nfe,
        "stop_reason": r.stop_reason,
    }
