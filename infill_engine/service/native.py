"""The native call, `v2/infill`: a document (or a window of it) and a cursor in, the fills out.

The request parses into the one hole (infill_engine/hole.py), which the service prepares as the
language server's in-process engine does (hole.prepare): it plans the span (planner.plan: the
hole's kind, span, stop rule), cuts the context to budgets that leave room for the furthest any
candidate may reach and tokenizes it once (context.py), and queues one row per candidate span.
A client needs no tokenizer, no weights and no torch; it sends text and gets text.

Request fields (a JSON object or a msgpack map):

| field        | type                                  | default       |
|--------------|---------------------------------------|---------------|
| text         | str: the document, or a window of it  | required      |
| offset       | int: the cursor, in code points       | required      |
| end          | int > offset: a selection's end       | none          |
| languageId   | str: an LSP language id               | "plaintext"   |
| trigger      | "automatic", "invoked" or "command"   | "automatic"   |
| candidates   | int in [1, 4]: fills of different spans | 1           |
| prefixTokens | int: context budget before the cursor | 1024          |
| suffixTokens | int: context budget after it          | 512           |
| extra        | list of {path, text}: other files' chunks, the most relevant last | [] |
| extraTokens  | int: their own budget, apart from the two above | 512  |
| params       | map: InfillParams fields (wire.py)    | {}            |
| deadline_ms  | number: give up if not started by then| none          |
| drafts       | list of drafts (draft.py: text, the rest optional): the client's own | [] |
| draft        | bool: look for drafts at all          | true          |

`extra` chunks go before the prefix, each under a line comment in the document's language
naming its path (context.build_extra), cut to `extraTokens` from the last chunk back; the
prefix and suffix keep their budgets, and the chunks get at most what the model's positions
leave beside them and the span.

With a cursor (no `end`) the service also drafts from what the request carries: lines of
`text` and of the `extra` chunks whose surroundings resemble the cursor's (drafts/), merged with
the client's own `drafts`, best first.

The reply: `shown`, what an editor would show, best first (text, source: "model" or the
draft's, score: the draft's), the one decision the language server makes too (decide.py: the
fills and the drafts finished against `text` in its indentation, nothing that adds a syntax
error or looks like a credential, ranked and gated for the trigger; the served model's fills
are trusted unless it is the builtin one); `items`, the model's own texts (one per candidate:
text, tokens, span, stop_reason, passes, timings; a text that looks like a credential emptied),
`plan` (kind, span, max_span, budgets) and `context` (the character range of `text` the model
saw: `start`, `end`; with a selection, `text[start:offset]` and `text[end:context.end]`; and,
when the call had chunks, `extra`: the paths of those kept, `extra_tokens` their tokens), so
that a client can check the fills against the same context; and `drafts` (text, source, score,
where, features, votes), best first.
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .. import drafts, languages
from ..decide import Choice, Policy, Seen, decide, trusted
from ..fields import flag
from ..finish import Around
from ..finish.secrets import held_back
from ..hole import EXTRA_TOKENS, Hole, Prepared, prepare
from ..params import InfillResult
from ..request import PREFIX_TOKENS, SUFFIX_TOKENS, InfillRequest
from ..scheduler import Priority, Scheduler, Ticket
from .wire import BadRequest, check_int, parse_deadline, parse_params, result_dict
from .work import Pending, Watch, run_rows

MAX_DOCUMENT_CHARS = 2_000_000
MAX_CANDIDATES = 4
MAX_BUDGET = 32768
MAX_EXTRA_CHUNKS = 64
MAX_EXTRA_CHARS = 1_000_000  # all chunks together
MAX_DRAFTS = 16
MAX_RENAMES = 16  # an edit history's (edits/history.py MAX_EDITS)
MAX_NAME_CHARS = 256
TRIGGERS: dict[str, Priority] = {
    "automatic": "automatic",
    "invoked": "invoked",
    "command": "command",
}


def _int(raw: Any, name: str, lo: int, hi: int, default: int | None = None) -> int:
    """A required int field, or an optional one when it has a default."""
    return default if raw is None and default is not None else check_int(raw, name, lo, hi)


def parse_chunks(raw: Any, field: str = "extra", name: str = "path") -> list[tuple[str, str]]:
    """Other files' chunks, a list of {`name`: str, text: str}, as (name, text); empty texts
    are left out. The native `extra` and llama.cpp's `input_extra` (name "filename")."""
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_EXTRA_CHUNKS:
        raise BadRequest(f"{field} must be a list of at most {MAX_EXTRA_CHUNKS} chunks")
    chunks: list[tuple[str, str]] = []
    for item in raw:
        if not isinstance(item, dict):
            raise BadRequest(f"each {field} chunk must be an object with a text")
        text, path = item.get("text", ""), item.get(name, "")
        if not isinstance(text, str) or not isinstance(path, str) or len(path) > 1024:
            raise BadRequest(f"{field} chunks have a string text and {name}")
        if text:
            chunks.append((path, text))
    if sum(len(t) for _, t in chunks) > MAX_EXTRA_CHARS:
        raise BadRequest(f"{field} is over {MAX_EXTRA_CHARS} characters in all")
    return chunks


def parse_drafts(raw: Any) -> list[drafts.Draft]:
    """A client's drafts: a list of {text, source, score, where, features, votes}."""
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_DRAFTS:
        raise BadRequest(f"drafts must be a list of at most {MAX_DRAFTS} objects")
    try:
        return [drafts.Draft.from_wire(item) for item in raw]
    except ValueError as e:
        raise BadRequest(str(e)) from None


def parse_renames(raw: Any) -> tuple[tuple[str, str], ...]:
    """Names renamed where the cursor is: a list of [old, new] pairs of names (edits/renames.py)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_RENAMES:
        raise BadRequest(f"renamed must be a list of at most {MAX_RENAMES} [old, new] pairs")
    pairs = []
    for item in raw:
        if not (
            isinstance(item, list | tuple)
            and len(item) == 2
            and all(isinstance(n, str) and 0 < len(n) <= MAX_NAME_CHARS for n in item)
            and all(n.replace("$", "_").isidentifier() for n in item)
        ):
            raise BadRequest("each renamed pair is [old, new], two names")
        pairs.append((str(item[0]), str(item[1])))
    return tuple(pairs)


def parse_native(msg: dict[str, Any], max_chars: int = MAX_DOCUMENT_CHARS) -> Hole:
    """A v2/infill request as the one hole; `BadRequest` names the first wrong field."""
    text = msg.get("text")
    if not isinstance(text, str):
        raise BadRequest("text must be a string")
    if len(text) > max_chars:
        raise BadRequest(f"text is over {max_chars} characters; send a window around the cursor")
    offset = _int(msg.get("offset"), "offset", 0, len(text))
    end = msg.get("end")
    if end is not None:
        end = _int(end, "end", offset, len(text))
    language_id = msg.get("languageId", "plaintext")
    if not isinstance(language_id, str) or not 0 < len(language_id) <= 64:
        raise BadRequest("languageId must be a string of 1 to 64 characters")
    trigger = msg.get("trigger", "automatic")
    if not isinstance(trigger, str) or trigger not in TRIGGERS:
        raise BadRequest(f"trigger must be one of {list(TRIGGERS)}")
    deadline_ms = parse_deadline(msg.get("deadline_ms"))
    return Hole(
        text=text,
        offset=offset,
        end=end,
        language_id=language_id,
        priority=TRIGGERS[trigger],
        candidates=_int(msg.get("candidates"), "candidates", 1, MAX_CANDIDATES, 1),
        prefix_tokens=_int(msg.get("prefixTokens"), "prefixTokens", 0, MAX_BUDGET, PREFIX_TOKENS),
        suffix_tokens=_int(msg.get("suffixTokens"), "suffixTokens", 0, MAX_BUDGET, SUFFIX_TOKENS),
        params=parse_params(msg.get("params")),
        deadline_ms=deadline_ms,
        extra=tuple(parse_chunks(msg.get("extra"))),
        extra_tokens=_int(msg.get("extraTokens"), "extraTokens", 0, MAX_BUDGET, EXTRA_TOKENS),
        drafts=tuple(parse_drafts(msg.get("drafts"))),
        drafting=_flag(msg.get("draft"), "draft"),
        renamed=parse_renames(msg.get("renamed")),
    )


def _flag(raw: Any, name: str, default: bool = True) -> bool:
    return default if raw is None else flag(raw, name, BadRequest)


async def run_native(
    engine: Any,
    scheduler: Scheduler,
    encoder: ThreadPoolExecutor,
    pending: Pending,
    ask: Hole,
    watch: Watch | None = None,
) -> tuple[Prepared, list[tuple[InfillResult, Ticket]]]:
    """An ask, prepared on the encoder thread and its rows run (work.run_rows): what both
    fronts do with a native call. Raises `Refusal`. `watch` hears the fills' leading text
    (a raw answer's stream: what is shown is known only when they are done)."""
    prepared: list[Prepared] = []

    def build(cancel: threading.Event) -> list[InfillRequest]:
        prepared.append(prepare(engine, dataclasses.replace(ask, cancel=cancel)))
        return prepared[0].requests

    done = await run_rows(scheduler, encoder, pending, build, ask.priority, ask.deadline_ms, watch)
    return prepared[0], done


def shown(
    ask: Hole, prepared: Prepared, done: list[tuple[InfillResult, Ticket]], model: str
) -> list[Choice]:
    """What an editor would show for the ask (decide.py): the fills and the drafts finished
    against the ask's text, in its own indentation, ranked and gated as the language server
    does for the ask's trigger (`automatic` or else invoked); the fills of `model` trusted as
    `decide.trusted` says, and shown only in the languages it knows (languages.py)."""
    text, ctx = ask.text, prepared.context
    seen = Seen(
        Around(text[: ask.offset], text[ask.after :], text[ask.offset : ask.after]),
        text[ctx.prefix_start : ask.offset],
        text[ask.after : ctx.suffix_end],
        ask.language_id,
        prepared.plan.kind,
        ask.renamed,
    )
    policy = Policy(
        automatic=ask.priority == "automatic",
        trust_model=trusted(model),
        model_knows=languages.knows(languages.model_languages(model), ask.language_id),
    )
    return decide([r.text for r, _ in done], prepared.drafts, seen, policy)


def without_secrets(done: list[tuple[InfillResult, Ticket]]) -> list[tuple[InfillResult, Ticket]]:
    """The results with every text that looks like a credential emptied (finish/secrets.py):
    what the routes of other tools answer, which no finishing step follows."""
    return [(dataclasses.replace(r, text="") if held_back(r.text) else r, t) for r, t in done]


def native_result(
    ask: Hole, prepared: Prepared, done: list[tuple[InfillResult, Ticket]], model: str
) -> dict[str, Any]:
    """The reply: the model's own texts (`items`, a credential emptied), and what an editor
    would show (`shown`, decide.py), with the plan, the context and the drafts."""
    chosen = shown(ask, prepared, done, model)
    plan, ctx = prepared.plan, prepared.context
    context: dict[str, Any] = {"start": ctx.prefix_start, "end": ctx.suffix_end}
    if ctx.extra is not None:  # the call had other files' chunks
        context.update(extra=list(ctx.extra.files), extra_tokens=len(ctx.extra.ids))
    return {
        "items": [result_dict(r, t) for r, t in without_secrets(done)],
        "shown": [{"text": c.text, "source": c.source, "score": c.score} for c in chosen],
        "plan": {
            "kind": plan.kind,
            "span": plan.span,
            "max_span": plan.max_span,
            "prefix_tokens": plan.prefix_tokens,
            "suffix_tokens": plan.suffix_tokens,
            "evidence": plan.evidence,
        },
        "context": context,
        "drafts": [d.wire() for d in prepared.drafts],
    }
