"""The refine call, the same for every front (the msgpack `refine` message, `POST /v2/refine`)
and for the language server's in-process engine: the selection is scored in one pass
(`Engine.refine`), its least confident tokens are remasked and re-predicted as a row of the
running batch, at command priority, beside the completions.

With budgets (`prefixTokens`, `suffixTokens`, and `languageId` for the planner) the selection
is a hole like a `v2/infill` one: its context is planned, cut to the budgets and tokenized by
the same `prepare` (native.py), so a client that has no tokenizer cuts exactly as one that has.
Without them, `prefix` and `suffix` go in as sent and `Engine.refine` trims them to the model's
positions."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..params import InfillParams, RefineResult
from ..request import PREFIX_TOKENS, SUFFIX_TOKENS
from ..scheduler import Scheduler, SchedulerError
from .native import MAX_BUDGET, NativeAsk, prepare
from .wire import BadRequest, check_int, parse_params
from .work import Refusal

log = logging.getLogger("infill_engine.service")


@dataclass(frozen=True)
class RefineAsk:
    prefix: str
    text: str  # the selection: what is re-predicted
    suffix: str
    fraction: float  # of its tokens remasked, in (0, 1]
    params: InfillParams
    language_id: str = "plaintext"
    budgets: tuple[int, int] | None = None  # prefix and suffix tokens: cut as a hole; None: as sent


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
    params = parse_params(msg.get("params"))
    language_id = msg.get("languageId", "plaintext")
    if not isinstance(language_id, str) or not 0 < len(language_id) <= 64:
        raise BadRequest("languageId must be a string of 1 to 64 characters")
    pre, suf = msg.get("prefixTokens"), msg.get("suffixTokens")
    if pre is None and suf is None:
        return RefineAsk(prefix, text, suffix, float(fraction), params, language_id)
    budgets = (
        PREFIX_TOKENS if pre is None else check_int(pre, "prefixTokens", 0, MAX_BUDGET),
        SUFFIX_TOKENS if suf is None else check_int(suf, "suffixTokens", 0, MAX_BUDGET),
    )
    return RefineAsk(prefix, text, suffix, float(fraction), params, language_id, budgets)


def cut(
    engine: Any, ask: RefineAsk, cancel: threading.Event, tree: Any | None = None
) -> tuple[str, str]:
    """The prefix and suffix the model sees around the selection: with budgets, what `prepare`
    cuts for the hole [len(prefix), len(prefix + text)) (`tree`: the document's, when kept);
    without, the ask's own."""
    if ask.budgets is None:
        return ask.prefix, ask.suffix
    offset = len(ask.prefix)
    hole = NativeAsk(
        text=ask.prefix + ask.text + ask.suffix,
        offset=offset,
        end=offset + len(ask.text),
        language_id=ask.language_id,
        priority="command",
        candidates=1,
        prefix_tokens=ask.budgets[0],
        suffix_tokens=ask.budgets[1],
        params=ask.params,
        deadline_ms=None,
        drafting=False,
    )
    ctx = prepare(engine, hole, cancel, tree=tree).context
    return ctx.prefix, ctx.suffix


def refine(
    engine: Any,
    ask: RefineAsk,
    cancel: threading.Event,
    scheduler: Scheduler | None = None,
    tree: Any | None = None,
) -> RefineResult:
    """Cut, then `Engine.refine` (its row joins `scheduler`'s batch, else the engine's own);
    blocking: run it on a thread."""
    prefix, suffix = cut(engine, ask, cancel, tree)
    result: RefineResult = engine.refine(
        prefix, ask.text, suffix, ask.fraction, ask.params, cancel, scheduler
    )
    return result


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
        r = await asyncio.to_thread(refine, engine, ask, cancel, scheduler)
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
