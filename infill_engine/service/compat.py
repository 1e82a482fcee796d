"""The HTTP routes other tools already speak, read into the native call (native.py) and written
back in their own shapes:

- llama.cpp's `POST /infill` (what llama.vim and llama.vscode send): `input_prefix` + `prompt`
  before the cursor, `input_suffix` after it, `input_extra` chunks of other files (the native
  call's `extra`: placed before the prefix under their file names, cut to their own budget,
  `extra_tokens`, our extension, default 512), `n_predict` as the most tokens, `stop`,
  `n_indent`, `response_fields`, `n_cmpl` (that many fills: a list of replies when over 1);
- OpenAI's `POST /v1/completions` with `prompt` + `suffix` (fill in the middle), `max_tokens`,
  `temperature`, `top_p`, `stop`, `n`, `seed`, `stream`, `stream_options.include_usage`.

Both answer what an editor would show (decide.py, as the language server decides: the fills
and the drafts finished against the request's text, nothing that adds a syntax error or looks
like a credential, ranked and gated as for an invoked request), one reply or choice per text it
shows ("" when it shows nothing; OpenAI's `n` repeats them in turn); `raw: true` (our
extension) answers the model's own texts, one per candidate, as the decoding left them. Stop
strings and `n_indent` apply to either.

Both echo the request's `model` (the served model's name when there is none), and both stream as
their servers do: the fill's text as its blocks finish (`llama_piece`, `openai_piece`: each new
piece of its committed leading text, held back while a stop string or `n_indent` could still cut
it, `streamable`), the rest of it when it is done, then the end (`llama_events`,
`openai_events`), llama.cpp's last event carrying the reply's timings and `tokens_predicted`,
OpenAI's usage on one last chunk of its own, and only when `stream_options.include_usage` asks
for it. The pieces of a fill join to the text a plain call answers. What an editor would show
is known only once the fills are done (the syntax check reads the whole text), so a finished
answer streams in one piece at the end; a `raw` one streams as the blocks finish.

Either way the service plans the span (the planner reads the text around the cursor), so the
model gets the length the hole needs, up to the client's token cap. Fields these routes do not
use (`samplers`, `cache_prompt`, `top_k`, penalties, ...) are accepted and ignored, as llama.cpp
does; a known field of the wrong type is a 400.
"""

from __future__ import annotations

import collections
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import grammars

from ..fields import flag, number_in
from ..hole import EXTRA_TOKENS, Hole
from ..params import InfillParams, InfillResult
from .native import MAX_BUDGET, MAX_CANDIDATES, MAX_DOCUMENT_CHARS, parse_chunks
from .wire import BadRequest, check_int

log = logging.getLogger("infill_engine.service")

MAX_STOPS = 16
MAX_MODEL_CHARS = 256
MAX_TOKENS = 4096
DEFAULT_MAX_TOKENS = 128  # llama.vim's n_predict; OpenAI's own default (16) is too short for code


@dataclass(frozen=True)
class CompatAsk:
    ask: Hole
    stop: tuple[str, ...] = ()
    n_indent: int = 0  # llama.cpp: a line indented less than this ends the fill
    stream: bool = False
    response_fields: tuple[str, ...] | None = None
    model: str | None = None  # echoed back when given
    warm_only: bool = False  # n_predict 0 / max_tokens 0: nothing to write (a cache warm-up)
    include_usage: bool = False  # OpenAI's stream_options.include_usage: a last usage chunk
    raw: bool = False  # the model's own texts, not what an editor would show (decide.py)


def _str(body: dict[str, Any], name: str, default: str = "") -> str:
    v = body.get(name, default)
    if v is None:
        return default
    if not isinstance(v, str):
        raise BadRequest(f"{name} must be a string")
    return v


def _model(body: dict[str, Any]) -> str | None:
    model = _str(body, "model")
    if len(model) > MAX_MODEL_CHARS:
        raise BadRequest(f"model must be at most {MAX_MODEL_CHARS} characters")
    return model or None


def _bool(body: dict[str, Any], name: str) -> bool:
    return flag(body.get(name, False), name, BadRequest)


def _number(body: dict[str, Any], name: str, lo: float, hi: float) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    return number_in(v, name, lo, hi, BadRequest)


def _int(body: dict[str, Any], name: str, lo: int, hi: int) -> int | None:
    v = body.get(name)
    return None if v is None else check_int(v, name, lo, hi)


def _stops(body: dict[str, Any]) -> tuple[str, ...]:
    v = body.get("stop")
    if v is None:
        return ()
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or len(items) > MAX_STOPS:
        raise BadRequest(f"stop must be a string or a list of at most {MAX_STOPS} strings")
    if not all(isinstance(s, str) and 0 < len(s) <= 256 for s in items):
        raise BadRequest("each stop must be a string of 1 to 256 characters")
    return tuple(items)


def _params(body: dict[str, Any], max_tokens: int) -> InfillParams:
    temperature = _number(body, "temperature", 0.0, 2.0) or 0.0
    top_p = _number(body, "top_p", 0.0, 1.0)
    seed = _int(body, "seed", -1, (1 << 63) - 1)
    try:
        return InfillParams(
            max_span=max(1, max_tokens),
            temperature=temperature,
            top_p=1.0 if top_p is None or top_p == 0 else top_p,
            seed=None if seed is None or seed < 0 else seed,
            min_tokens=1,
        )
    except ValueError as e:
        raise BadRequest(str(e)) from None


def _language(body: dict[str, Any], paths: list[str], text: str, offset: int) -> str:
    """Our extension `languageId`, else a `filename`, else the commonest language of the other
    files' chunks, else the language whose grammar parses the text (grammars.guess: the syntax
    check of what is shown needs one), else plaintext (planned from its lines alone)."""
    given = _str(body, "languageId") or _str(body, "language_id")
    if given:
        if len(given) > 64:
            raise BadRequest("languageId must be at most 64 characters")
        return given
    own = _str(body, "filename")
    found = [lang for p in ([own] if own else paths) if (lang := grammars.language_for_path(p))]
    if found:
        return collections.Counter(found).most_common(1)[0][0]
    return grammars.guess(text, offset) or "plaintext"


def _ask(
    text: str,
    offset: int,
    language_id: str,
    candidates: int,
    params: InfillParams,
    extra: tuple[tuple[str, str], ...] = (),
    extra_tokens: int = EXTRA_TOKENS,
) -> Hole:
    """The route's fill as the one hole: invoked, at the cursor, with the default budgets."""
    if len(text) > MAX_DOCUMENT_CHARS:
        raise BadRequest(f"the request is over {MAX_DOCUMENT_CHARS} characters")
    return Hole(
        text,
        offset,
        language_id=language_id,
        priority="invoked",
        candidates=candidates,
        params=params,
        extra=extra,
        extra_tokens=extra_tokens,
    )


def parse_llama(body: dict[str, Any]) -> CompatAsk:
    """llama.cpp's `/infill` request."""
    prefix = _str(body, "input_prefix") + _str(body, "prompt")
    suffix = _str(body, "input_suffix")
    chunks = parse_chunks(body.get("input_extra"), "input_extra", "filename")
    names = [name for name, _ in chunks if name]
    language_id = _language(body, names, prefix + suffix, len(prefix))
    extra_tokens = _int(body, "extra_tokens", 0, MAX_BUDGET)
    n_predict = _int(body, "n_predict", -1, MAX_TOKENS)
    max_tokens = DEFAULT_MAX_TOKENS if n_predict is None or n_predict < 0 else n_predict
    fields = body.get("response_fields")
    if fields is not None and (
        not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)
    ):
        raise BadRequest("response_fields must be a list of strings")
    n_cmpl = _int(body, "n_cmpl", 1, MAX_CANDIDATES) or 1
    return CompatAsk(
        ask=_ask(
            prefix + suffix,
            len(prefix),
            language_id,
            n_cmpl,
            _params(body, max_tokens),
            tuple(chunks),
            EXTRA_TOKENS if extra_tokens is None else extra_tokens,
        ),
        stop=_stops(body),
        n_indent=_int(body, "n_indent", 0, 4096) or 0,
        stream=_bool(body, "stream"),
        raw=_bool(body, "raw"),
        response_fields=tuple(fields) if fields else None,
        model=_model(body),
        warm_only=max_tokens == 0,
    )


def parse_openai(body: dict[str, Any]) -> CompatAsk:
    """OpenAI's `/v1/completions` request, `suffix` making it a fill in the middle."""
    prompt = body.get("prompt", "")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise BadRequest("prompt must be a string (or a list of one string)")
    suffix = _str(body, "suffix")
    if body.get("echo") not in (None, False):
        raise BadRequest("echo is not supported")
    max_tokens = _int(body, "max_tokens", 0, MAX_TOKENS)
    max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    n = _int(body, "n", 1, MAX_CANDIDATES) or 1
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequest("stream_options must be an object")
    usage = (options or {}).get("include_usage", False)
    include_usage = flag(usage, "stream_options.include_usage", BadRequest)
    language_id = _language(body, [], prompt + suffix, len(prompt))
    return CompatAsk(
        ask=_ask(prompt + suffix, len(prompt), language_id, n, _params(body, max_tokens)),
        stop=_stops(body),
        stream=_bool(body, "stream"),
        raw=_bool(body, "raw"),
        model=_model(body),
        warm_only=max_tokens == 0,
        include_usage=include_usage,
    )


def clip(text: str, stop: tuple[str, ...], n_indent: int) -> tuple[str, str | None]:
    """Cut a fill at the first stop string (which is dropped) and, with `n_indent`, before the
    first non-blank line indented less than it. Returns the text and the stop string hit."""
    hit: str | None = None
    cut = len(text)
    for s in stop:
        at = text.find(s)
        if 0 <= at < cut:
            cut, hit = at, s
    text = text[:cut]
    if n_indent > 0:
        at = 0
        while (nl := text.find("\n", at)) >= 0:
            line = text[nl + 1 :].split("\n", 1)[0]
            if line.strip() and len(line) - len(line.lstrip(" \t")) < n_indent:
                return text[: nl + 1], hit
            at = nl + 1
    return text, hit


def streamable(text: str, stop: tuple[str, ...], n_indent: int) -> str:
    """The part of a fill's leading text that `clip` keeps whatever follows it: the text clipped
    as the whole fill will be, less a tail that may begin a stop string and, with `n_indent`, a
    last line of nothing but whitespace yet (the line that follows may end the fill)."""
    kept, _ = clip(text, stop, n_indent)
    ends = [len(text) - k for s in stop for k in range(1, len(s)) if text.endswith(s[:k])]
    kept = kept[: min(ends, default=len(kept))]
    line = kept.rfind("\n") + 1
    if n_indent > 0 and line and not kept[line:].strip():
        kept = kept[:line]
    return kept


def rest(full: str, sent: str) -> str:
    """What is left of a fill after the pieces already streamed."""
    if full and not full.startswith(sent):  # pieces are held back till nothing can change them
        log.warning("a streamed fill's pieces are not the head of its text")
    return full[len(sent) :]


def finish_reason(r: InfillResult, hit: str | None) -> str:
    return "length" if hit is None and r.stop_reason == "span_full" else "stop"


def llama_reply(
    c: CompatAsk,
    r: InfillResult | None,
    text: str,
    hit: str | None,
    model: str,
    n_ctx: int,
    index: int = 0,
) -> dict[str, Any]:
    """llama.cpp's `/infill` answer (its final result) for the `index`-th fill, whole (`narrow`
    cuts it to `response_fields`). `model` is the served model (the request's own name is
    echoed), `n_ctx` its positions (llama.vscode's status bar reads it)."""
    tokens = r.tokens if r is not None else 0
    ms = r.elapsed_ms if r is not None else 0.0
    passes = r.nfe if r is not None else 0
    p = c.ask.params
    full: dict[str, Any] = {
        "index": index,
        "content": text,
        "id_slot": 0,
        "stop": True,
        "model": c.model or model,
        "generation_settings": {
            "n_ctx": n_ctx,
            "n_predict": 0 if c.warm_only else p.max_span,
            "temperature": p.temperature,
            "top_p": p.top_p,
            "model": model,
        },
        "tokens_predicted": tokens,
        "tokens_evaluated": 0,
        "has_new_line": "\n" in text,
        "truncated": False,
        "stop_type": "word" if hit else ("limit" if r and r.stop_reason == "span_full" else "eos"),
        "stopping_word": hit or "",
        "tokens_cached": 0,
        "timings": {
            "prompt_n": 0,
            "prompt_ms": 0.0,
            "prompt_per_token_ms": 0.0,
            "prompt_per_second": 0.0,
            "predicted_n": tokens,
            "predicted_ms": round(ms, 3),
            "predicted_per_token_ms": round(ms / tokens, 3) if tokens else 0.0,
            "predicted_per_second": round(tokens * 1000 / ms, 3) if ms > 0 else 0.0,
            "forward_passes": passes,
        },
    }
    return full


def narrow(c: CompatAsk, full: dict[str, Any]) -> dict[str, Any]:
    """A reply cut to `response_fields` when given, each named by its path
    ("timings/predicted_n")."""
    if c.response_fields is None:
        return full
    out: dict[str, Any] = {}
    for path in c.response_fields:
        node: Any = full
        for part in path.split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            out[path] = node
    return out


def openai_reply(
    c: CompatAsk,
    choices: list[tuple[str, str]],
    prompt_tokens: int,
    completion_tokens: int,
    model: str,
    ident: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `text_completion` object: `choices` are (text, finish_reason), repeated in turn up to
    `n` (greedy fills differ by their span: there are at most three distinct ones). `ident` is
    the `id` and `created` of its stream (`openai_ident`), a new one when None."""
    n = c.ask.candidates
    choices = [choices[i % len(choices)] for i in range(n)] if choices else []
    return {
        **_head(c, ident or openai_ident(), model),
        "choices": [
            {"text": t, "index": i, "logprobs": None, "finish_reason": f}
            for i, (t, f) in enumerate(choices)
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def openai_ident() -> dict[str, Any]:
    """The `id` and `created` that every chunk of one OpenAI stream shares."""
    return {"id": f"cmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time())}


def _head(c: CompatAsk, ident: dict[str, Any], model: str) -> dict[str, Any]:
    head = {"id": ident["id"], "object": "text_completion", "created": ident["created"]}
    return {**head, "model": c.model or model}


def llama_piece(c: CompatAsk, index: int, text: str) -> dict[str, Any]:
    """A streamed `/infill` event with a new piece of the `index`-th fill (its block ended)."""
    return {"index": index, "content": text, "stop": False, "id_slot": 0, "tokens_evaluated": 0}


def openai_piece(
    c: CompatAsk, ident: dict[str, Any], model: str, index: int, text: str
) -> dict[str, Any]:
    """A streamed `/v1/completions` chunk with a new piece of the `index`-th choice."""
    chunk = _head(c, ident, model)
    if c.include_usage:
        chunk["usage"] = None
    choice = {"text": text, "index": index, "logprobs": None, "finish_reason": None}
    return {**chunk, "choices": [choice]}


def llama_events(
    c: CompatAsk, replies: list[dict[str, Any]], sent: list[str] | None = None
) -> list[dict[str, Any]]:
    """A streamed `/infill` from its whole replies (`llama_reply`): what each fill has left after
    the pieces `sent` already (all of it when none was), then each one's final event, as
    llama.cpp's last: the reply (timings, `tokens_predicted`, `stop_type`, ..., narrowed as a
    plain reply) with no content and `stop`."""
    events = []
    for i, reply in enumerate(replies):
        before = sent[i] if sent is not None and i < len(sent) else ""
        content = rest(reply["content"], before)
        if before and not content:
            continue
        tokens = reply["tokens_predicted"]
        events.append({"index": i, "content": content, "stop": False, "id_slot": 0,
                       "tokens_predicted": tokens, "tokens_evaluated": 0})  # fmt: skip
    for i, reply in enumerate(replies):
        events.append({**narrow(c, reply), "index": i, "content": "", "stop": True})
    return events


def openai_events(
    c: CompatAsk, reply: dict[str, Any], sent: list[str] | None = None
) -> list[dict[str, Any]]:
    """A streamed `/v1/completions`: a chunk with what each choice's text has left after the
    pieces `sent` already (all of it when none was), then one with each one's `finish_reason`,
    then, under `stream_options.include_usage`, a chunk of no choices with the usage (every
    other chunk then has `usage: null`, as OpenAI's)."""
    head = {k: reply[k] for k in ("id", "object", "created", "model")}
    if c.include_usage:
        head["usage"] = None
    chunks = []
    for i, choice in enumerate(reply["choices"]):
        before = sent[i] if sent is not None and i < len(sent) else ""
        text = rest(choice["text"], before)
        if not before or text:
            chunks.append({**head, "choices": [{**choice, "text": text, "finish_reason": None}]})
    for choice in reply["choices"]:
        chunks.append({**head, "choices": [{**choice, "text": ""}]})
    if c.include_usage:
        chunks.append({**head, "choices": [], "usage": reply["usage"]})
    return chunks
