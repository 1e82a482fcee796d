"""A remote's answer is hostile input until checked, and here is where the engine clients check
it (hosted_fim.py, a hosted API; http_link.py and link.py, our engine service), and keep
what they log clean:

- **Bytes.** An answer (a body, or a whole stream) is read as it arrives and at most
  MAX_ANSWER_BYTES of it, a completion's text at most MAX_TEXT_CHARS: past either the request
  fails (`BadAnswer`, code `too_large`) and the server goes on. An encoded (compressed) answer
  is refused: the clients ask for none, and a compressed body's size is not its size in memory.
- **Time.** A request has one deadline, from the first byte sent to the last one read, kept by
  the client that sends it: a stream of keep-alives or a slow drip ends there.
- **Parsing.** A JSON answer holds at most MAX_JSON_MARKS structure marks and no integer of more
  than MAX_INT_DIGITS digits, so the largest one allowed parses in about 20 ms (CPython's
  parser holds the GIL throughout: a thread alone would not free the loop); one over
  PARSE_OFF_LOOP bytes is parsed on a thread all the same.
- **Pauses.** `retry_after_s` reads `Retry-After` as at most MAX_RETRY_AFTER_S, and a negative,
  non-finite or unreadable one as absent (backoff.py's `Backoff.after` waits it).
- **Logs.** `shown` is what of a remote's text may be logged or shown: control characters
  escaped (no forged log lines, no terminal escapes), at most SHOWN_CHARS characters.
  `guard_logs` puts a `SecretFilter` on pygls' loggers and ours: the value of a token, a key or
  an Authorization header is redacted from every record at every level (pygls logs the
  initialize params, `engineToken` among them, at DEBUG), and so is each secret in use.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import re
import time
from collections.abc import AsyncGenerator, Iterable
from typing import Any

import httpx

MAX_ANSWER_BYTES = 4 << 20  # a whole answer: 100x a long completion, far below a memory problem
# A completion's text: decode.maxSpan is at most 512 tokens (16 characters a token here), and
# the finishing step compiles the document with the text up to 24 times, on the event loop and
# holding the GIL: 16 Ki characters cost it 65-100 ms on a 2-core machine, 8 Ki half that.
MAX_TEXT_CHARS = 8 << 10
MAX_JSON_MARKS = 50_000  # , : [ { in one JSON answer; 50k small values parse in ~20 ms
MAX_INT_DIGITS = 40  # an integer's digits: CPython reads a long one in quadratic time
PARSE_OFF_LOOP = 256 << 10  # bytes of JSON parsed on a thread
MAX_RETRY_AFTER_S = 60.0  # the longest pause a server's Retry-After may ask for
SHOWN_CHARS = 200  # of a remote's message, in a log line or a message to the user

_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)  # C0, C1, line and paragraph separators, bidi and zero-width marks, lone surrogates
_DELTA = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?")  # Retry-After's delta-seconds (and a fraction)
_KEYED = re.compile(
    r"""(?i)(\b(?:engine_?token|token|api_?key|access_?token|secret|password|authorization)"""
    r"""['"]?\s*[:=]\s*)('[^']*'|"(?:[^"\\]|\\.)*"|(?:bearer\s+)?[^\s,;'"}\])]+)"""
)  # a secret's value after its name, as JSON, a Python repr or an HTTP header writes it
_BEARER = re.compile(r"(?i)\b(bearer\s+)[\w.~+/=-]+")
_GUARDED = ("pygls", "dllm-infill-ls", "lsp_server", "httpx", "httpcore")
_PYGLS = ("pygls.protocol.json_rpc", "pygls.protocol.language_server", "pygls.server",
          "pygls.client", "pygls.io_", "pygls.feature_manager", "pygls.workspace")  # fmt: skip
_SECRETS: set[str] = set()  # the secrets in use, redacted wherever they appear


class BadAnswer(ValueError):
    """An answer this side will not take: too large (`too_large`), or not what was asked for
    (`bad_reply`). The message is this side's, with the remote's part `shown`."""

    def __init__(self, message: str, code: str = "bad_reply") -> None:
        super().__init__(message)
        self.code = code


def shown(text: object, limit: int = SHOWN_CHARS) -> str:
    """A remote's text as a log line or a message may hold it: at most `limit` characters (and
    an ellipsis), each control character written as an escape (`\\x1b`, `\\u202e`)."""
    s = text if isinstance(text, str) else str(text)
    if len(s) > limit:
        s = s[:limit] + "..."
    return _CONTROL.sub(_escape, s)


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


# -- bytes ----------------------------------------------------------------------------------------
def _too_large(what: str = "the answer", limit: int = MAX_ANSWER_BYTES) -> BadAnswer:
    return BadAnswer(f"{what} is larger than {limit >> 10} KiB: not read further", "too_large")


def _plain(response: httpx.Response, limit: int = MAX_ANSWER_BYTES) -> None:
    """An answer this side can bound: not encoded, not announced larger than the cap."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise BadAnswer(f"an answer encoded as {shown(encoding, 40)!r}, which was not asked for")
    length = response.headers.get("content-length", "").strip()
    if length and (len(length) > 12 or (length.isdigit() and int(length) > limit)):
        raise _too_large(limit=limit)


async def read_body(response: httpx.Response, limit: int = MAX_ANSWER_BYTES) -> bytes:
    """The whole body, read as it arrives; BadAnswer past `limit` bytes (a caller's tighter cap,
    else MAX_ANSWER_BYTES), not read further."""
    _plain(response, limit)
    parts, size = [], 0
    async for chunk in response.aiter_raw():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit=limit)
        parts.append(chunk)
    return b"".join(parts)


async def read_lines(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The body's lines (ended by LF or CRLF) as they arrive; BadAnswer once the body passes
    MAX_ANSWER_BYTES, however it is cut into lines."""
    _plain(response)
    size, parts = 0, []
    async for chunk in response.aiter_raw():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise _too_large()
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            parts.append(chunk[start:end])
            line, parts = b"".join(parts), []
            yield line[:-1] if line.endswith(b"\r") else line
            start = end + 1
        if start < len(chunk):
            parts.append(chunk[start:])
        await asyncio.sleep(0)  # a fast sender's chunks come ready: the loop serves others too
    if parts:
        yield b"".join(parts)


def check_text(text: str) -> str:
    """A completion's text, when it is no longer than MAX_TEXT_CHARS."""
    if len(text) > MAX_TEXT_CHARS:
        raise BadAnswer(
            f"the completion's text is longer than {MAX_TEXT_CHARS} characters: not read further",
            "too_large",
        )
    return text


# -- parsing --------------------------------------------------------------------------------------
async def parse_json(raw: bytes) -> Any:
    """`loads`, on a thread when `raw` is large."""
    if len(raw) > PARSE_OFF_LOOP:
        return await asyncio.to_thread(loads, raw)
    return loads(raw)


def loads(raw: bytes) -> Any:
    """JSON of bounded cost, or BadAnswer."""
    marks = raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{")
    if marks > MAX_JSON_MARKS:
        raise BadAnswer(f"an answer with more than {MAX_JSON_MARKS} JSON values: not parsed")
    try:
        return json.loads(raw, parse_int=_int)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise BadAnswer("an answer that is not JSON") from None


def _int(digits: str) -> int:
    if len(digits) > MAX_INT_DIGITS:
        raise ValueError("an integer too long to read")
    return int(digits)


# -- pauses ---------------------------------------------------------------------------------------
def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """A `Retry-After` header in seconds (delta-seconds or an HTTP date), at most
    MAX_RETRY_AFTER_S; None when absent, negative, non-finite or unreadable."""
    value = (value or "").strip()
    if not value or len(value) > 64:
        return None
    if _DELTA.fullmatch(value):
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        seconds = max(0.0, when - (time.time() if now is None else now))  # a past date: now
    return min(seconds, MAX_RETRY_AFTER_S) if math.isfinite(seconds) else None


# -- logs -----------------------------------------------------------------------------------------
class SecretFilter(logging.Filter):
    """Redacts secrets from each record it sees: the value of a key named like a token, a key,
    a password or an Authorization header, a bearer credential, and the secrets in use.
    `escape`: control characters too (records that carry a remote's headers: httpx)."""

    def __init__(self, escape: bool = False) -> None:
        super().__init__()
        self.escape = escape

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is for logging to report, as it does
            return True
        clean = redact(message)
        if self.escape:
            clean = _CONTROL.sub(_escape, clean)
        if clean != message:
            record.msg, record.args = clean, ()
        return True


def redact(text: str) -> str:
    text = _BEARER.sub(r"\1***", _KEYED.sub(r"\1'***'", text))
    for secret in _SECRETS:
        text = text.replace(secret, "***")
    return text


_FILTER, _ESCAPING = SecretFilter(), SecretFilter(escape=True)


def guard_logs(secrets: Iterable[str | None] = ()) -> None:
    """Put the secret filter on pygls' loggers, ours and httpx's (again: loggers made since
    are covered too), and redact `secrets` (those of 8 characters or more) from now on."""
    names = set(_PYGLS) | set(_GUARDED)
    names.update(n for n in logging.root.manager.loggerDict if n.startswith(_GUARDED))
    for name in names:
        logger = logging.getLogger(name)
        f = _ESCAPING if name.startswith(("httpx", "httpcore")) else _FILTER
        if f not in logger.filters:
            logger.addFilter(f)
    _SECRETS.update(s for s in secrets if s and len(s) >= 8)
