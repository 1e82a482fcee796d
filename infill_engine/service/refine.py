"""The refine call, the same for every front (the msgpack `refine` message, `POST /v2/refine`)
and for the language server's in-process engine: the selection is scored in one pass
(`Engine.refine`), its least confident tokens are remasked and re-predicted as a row of the
running batch, at command priority, beside the completions.

A refine asks about a hole (hole.py): the selection [offset, end) of its text. With budgets
(`prefixTokens`, `suffixTokens`, and `languageId` for the planner) its context is planned, cut
to them and tokenized by the same `prepare` as a `v2/infill` hole's, budgeted for the
selection's own tokens, so a client that has no tokenizer cuts exactly as one that has and the
language server's in-process engine cuts as the service does. Without them (`cut` off), the
prefix and suffix go in as sent and `Engine.refine` trims them to the model's positions."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..fields import number_in
from ..hole import Hole, prepare
from ..params import RefineResult
from ..request import PREFIX_TOKENS, SUFFIX_TOKENS
from ..scheduler import Scheduler, SchedulerError, settled
from .native import MAX_BUDGET
from .wire import BadRequest, check_int, parse_params
from .work import Refusal

log = logging.getLogger("infill_engine.service")


class Refiner(Protocol):
    """What a refine uses of its service (front.Service): the engine scores and remasks, the
    scheduler runs the re-prediction beside the service's other rows."""

    engine: Any
    scheduler: Scheduler


@dataclass(frozen=True)
class RefineAsk:
    hole: Hole  # the selection [offset, end) of its text is what is re-predicted
    fraction: float  # of its tokens remasked, in (0, 1]
    cut: bool = True  # the context cut to the hole's budgets; False: the text around as sent


def parse_refine(msg: Mapping[str, Any]) -> RefineAsk:
    """The call's fields (BadRequest names the one that is wrong)."""
    texts = [msg.get(k, "") for k in ("prefix", "text", "suffix")]
    if not all(isinstance(t, str) for t in texts):
        raise BadRequest("prefix, text and suffix must be strings")
    if not texts[1]:
        raise BadRequest("text must not be empty")
    fraction = number_in(msg.get("fraction", 0.25), "fraction", 0, 1, BadRequest, above=True)
    prefix, text, suffix = texts
    language_id = msg.get("languageId", "plaintext")
    if not isinstance(language_id, str) or not 0 < len(language_id) <= 64:
        raise BadRequest("languageId must be a string of 1 to 64 characters")
    pre, suf = msg.get("prefixTokens"), msg.get("suffixTokens")
    pre_n = PREFIX_TOKENS if pre is None else check_int(pre, "prefixTokens", 0, MAX_BUDGET)
    suf_n = SUFFIX_TOKENS if suf is None else check_int(suf, "suffixTokens", 0, MAX_BUDGET)
    hole = Hole(
        prefix + text + suffix,
        len(prefix),
        len(prefix) + len(text),
        language_id,
        "command",
        prefix_tokens=pre_n,
        suffix_tokens=suf_n,
        params=parse_params(msg.get("params")),
        drafting=False,
    )
    return RefineAsk(hole, float(fraction), cut=pre is not None or suf is not None)


def context(engine: Any, ask: RefineAsk) -> tuple[str, str]:
    """The prefix and suffix the model sees around the selection: what `prepare` cuts for the
    hole, its initial span the selection's own tokens (so that the row's context fits beside
    them, trimmed nowhere again); without `cut`, the text around it as sent."""
    hole = ask.hole
    if not ask.cut:
        return hole.text[: hole.offset], hole.text[hole.after :]
    n = max(1, len(engine.encode(hole.text[hole.offset : hole.after])))
    params = dataclasses.replace(hole.params, span=n, max_span=max(n, hole.params.max_span))
    one = dataclasses.replace(hole, candidates=1, drafting=False, params=params)
    ctx = prepare(engine, one).context
    return ctx.prefix, ctx.suffix


def refine(engine: Any, ask: RefineAsk, scheduler: Scheduler | None = None) -> RefineResult:
    """Cut, score and remask (`Engine.remask`), then re-predict as a row of `scheduler`'s batch
    (a service's; the engine's own by default), stopped by the hole's cancel flag; blocking:
    run it on a thread."""
    prefix, suffix = context(engine, ask)
    hole = ask.hole
    selection = hole.text[hole.offset : hole.after]
    remask = engine.remask(
        prefix, selection, suffix, fraction=ask.fraction, params=hole.params, cancel=hole.cancel
    )
    queue = scheduler if scheduler is not None else engine.scheduler()
    result: RefineResult = remask.result(
        settled(queue.submit_request(remask.request, priority="command"))
    )
    return result


def can_refine(engine: Any) -> bool:
    return hasattr(engine, "remask")


async def run_refine(service: Refiner, ask: RefineAsk, cancel: threading.Event) -> dict[str, Any]:
    """The refined selection as the reply's result map, on the service's engine and scheduler;
    raises `Refusal`."""
    if not can_refine(service.engine):
        raise Refusal("unknown_method", "this engine cannot refine")
    try:
        mine = dataclasses.replace(ask, hole=dataclasses.replace(ask.hole, cancel=cancel))
        r = await asyncio.to_thread(refine, service.engine, mine, service.scheduler)
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
