"""The engine service's messages: request fields checked and built into the engine's own types
(`InfillParams`, `StopRule`, both validated on construction), result and error maps, and the
handshake both sides send. Everything a client may write passes through here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..fields import int_in, is_id, is_int, is_number
from ..params import InfillParams, InfillResult
from ..scheduler import Ticket
from ..stop import StopRule
from .frames import Message

PROTOCOL_VERSION = 1
MAX_ID_CHARS = 256

RequestId = int | str


class ServiceError(Exception):
    """An error reply, on the client side."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


PARAM_FIELDS = frozenset(f.name for f in dataclasses.fields(InfillParams))
STOP_FIELDS = frozenset(f.name for f in dataclasses.fields(StopRule))


class BadRequest(Exception):
    code = "bad_request"


def parse_id(msg: Message) -> RequestId:
    rid = msg.get("id")
    if not is_id(rid):
        raise BadRequest("id must be an int or a string")
    if isinstance(rid, str) and len(rid) > MAX_ID_CHARS:
        raise BadRequest(f"id is over {MAX_ID_CHARS} characters")
    return rid


def parse_params(raw: Any) -> InfillParams:
    if raw is None:
        return InfillParams()
    if not isinstance(raw, dict):
        raise BadRequest("params must be a map")
    unknown = sorted(str(k) for k in raw if k not in PARAM_FIELDS)
    if unknown:
        raise BadRequest(f"unknown params: {', '.join(unknown)[:200]}")
    seed = raw.get("seed")
    if seed is not None and not is_int(seed):
        raise BadRequest("params.seed must be an int")
    if seed is not None and not 0 <= seed < 1 << 63:
        raise BadRequest("params.seed must be in [0, 2**63)")
    try:
        return InfillParams(**raw)
    except (ValueError, TypeError) as e:
        raise BadRequest(f"params: {e}"[:300]) from None


def check_int(raw: Any, name: str, lo: int, hi: int) -> int:
    """`raw` as an int in [lo, hi] (a bool is not one); `BadRequest` naming the field if not."""
    return int_in(raw, name, lo, hi, BadRequest)


def parse_deadline(raw: Any) -> float | None:
    """`deadline_ms`: None, or a positive number of milliseconds (under 1e9)."""
    if raw is not None and (not is_number(raw) or not 0 < raw < 1e9):
        raise BadRequest("deadline_ms must be a positive number of milliseconds")
    return None if raw is None else float(raw)


@dataclass(frozen=True)
class WirePlan:
    """A span plan sent by the client (planner.SpanPlan's span, max_span and stop rule)."""

    span: int
    max_span: int
    stop: StopRule


def parse_plan(raw: Any) -> WirePlan | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise BadRequest("plan must be a map")
    span, max_span, stop = raw.get("span"), raw.get("max_span", raw.get("span")), raw.get("stop")
    span = check_int(span, "plan.span", 1, 1 << 16)
    max_span = check_int(max_span, "plan.max_span", 1, 1 << 16)
    if max_span < span:
        raise BadRequest("plan.max_span must be >= plan.span")
    stop = {} if stop is None else stop
    if not isinstance(stop, dict):
        raise BadRequest("plan.stop must be a map")
    unknown = sorted(str(k) for k in stop if k not in STOP_FIELDS)
    if unknown:
        raise BadRequest(f"unknown plan.stop fields: {', '.join(unknown)[:200]}")
    try:
        rule = StopRule(**stop)
    except ValueError as e:
        raise BadRequest(f"plan.{e}"[:300]) from None
    return WirePlan(span, max_span, rule)


def result_dict(r: InfillResult, ticket: Ticket) -> dict[str, Any]:
    return {
        "text": r.text,
        "tokens": r.tokens,
        "nfe_full": r.nfe_full,
        "nfe_block": r.nfe_block,
        "elapsed_ms": round(r.elapsed_ms, 3),
        "stop_reason": r.stop_reason,
        "span": r.span,
        "grown": r.grown,
        "edits": r.edits,
        "verified": r.verified,
        "drafted": r.drafted,
        "queue_ms": round(ticket.queue_ms, 3),
        "batch_size": ticket.batch_size,
    }


def error(rid: RequestId | None, kind: str | None, code: str, message: str) -> Message:
    return {"type": kind, "id": rid, "error": {"code": code, "message": message}}


def hello(token: str | None) -> Message:
    """The handshake a client opens every connection with."""
    message: Message = {"type": "hello", "version": PROTOCOL_VERSION}
    if token is not None:
        message["token"] = token
    return message


def reply_error(reply: Message) -> ServiceError | None:
    """An error reply's error (a hello's too); None for a result."""
    if "error" not in reply:
        return None
    err = reply.get("error")
    err = err if isinstance(err, dict) else {}
    return ServiceError(str(err.get("code")), str(err.get("message")))
