"""Frames of the engine service: a 4-byte big-endian length and a msgpack map, either way.
Decoding never raises on any bytes: a bad frame is a `FrameError` in its place, and a length over
the limit is a fatal one, after which the stream cannot be followed. A well-formed map with a
string that is not text (text.py) is a `FrameError` too, of code `bad_request`, naming the field
and carrying the message's id, so that its request is answered like any other bad field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack

from ..fields import is_id
from .text import unicode_fault

MAX_FRAME = 1 << 20  # bytes of one msgpack payload, either way
HEADER = 4
CHUNK = 1 << 16

Message = dict[str, Any]


class FrameError(Exception):
    """A frame that is not a msgpack map. `fatal`: the stream cannot be followed past it (a
    length over the limit), so the connection ends after the error reply. `code` is the error
    code of the reply: `bad_frame`, or `bad_request` for a map whose text is broken, whose
    `rid` and `kind` are the message's id and type (when those are clean) to answer it by."""

    def __init__(
        self,
        message: str,
        fatal: bool = False,
        *,
        code: str = "bad_frame",
        rid: int | str | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(message)
        self.fatal = fatal
        self.code = code
        self.rid = rid
        self.kind = kind


def encode_frame(message: Mapping[str, Any], max_frame: int = MAX_FRAME) -> bytes:
    body: bytes = msgpack.packb(dict(message), use_bin_type=True)
    if len(body) > max_frame:
        raise FrameError(f"message of {len(body)} bytes exceeds the {max_frame}-byte frame limit")
    return len(body).to_bytes(HEADER, "big") + body


def decode_payload(body: bytes) -> Message:
    """One frame's payload -> a map with string keys whose strings are all text, or FrameError."""
    try:
        obj = msgpack.unpackb(
            body, raw=False, use_list=True, strict_map_key=True, unicode_errors="surrogateescape"
        )
    except Exception as e:  # msgpack raises several kinds for malformed input
        raise FrameError(f"malformed msgpack: {type(e).__name__}: {e}"[:200]) from None
    if not isinstance(obj, dict):
        raise FrameError(f"a message must be a msgpack map, got {type(obj).__name__}")
    if not all(isinstance(k, str) for k in obj):
        raise FrameError("a message's keys must be strings")
    if (fault := unicode_fault(obj)) is not None:
        rid, kind = obj.get("id"), obj.get("type")
        raise FrameError(
            fault,
            code="bad_request",
            rid=rid if is_id(rid) and unicode_fault(rid) is None else None,
            kind=kind if isinstance(kind, str) and unicode_fault(kind) is None else None,
        )
    return obj


def _scan(buf: bytes | bytearray, max_frame: int) -> tuple[list[Message | FrameError], int, bool]:
    """The frames complete at the front of buf: (items, bytes consumed, broken).

    A frame with a bad payload becomes a FrameError item and the stream goes on after it. A
    length over max_frame is a fatal FrameError item; nothing after it is read (broken)."""
    items: list[Message | FrameError] = []
    pos, end = 0, len(buf)
    while end - pos >= HEADER:
        n = int.from_bytes(buf[pos : pos + HEADER], "big")
        if n > max_frame:
            items.append(
                FrameError(f"frame of {n} bytes exceeds the {max_frame}-byte limit", fatal=True)
            )
            return items, pos, True
        if end - pos - HEADER < n:
            break
        body = bytes(buf[pos + HEADER : pos + HEADER + n])
        pos += HEADER + n
        try:
            items.append(decode_payload(body))
        except FrameError as e:
            items.append(e)
    return items, pos, False


def decode_frames(
    buffer: bytes, max_frame: int = MAX_FRAME
) -> tuple[list[Message | FrameError], bytes]:
    """Decode the complete frames at the front of `buffer`: (messages, the rest).

    A malformed frame is a `FrameError` in the list, in its place; an oversized length is a
    fatal one, last, with the rest starting at its header. Never raises on any bytes."""
    items, used, _ = _scan(buffer, max_frame)
    return items, bytes(buffer[used:])


class FrameReader:
    """Incremental `decode_frames`: feed what the socket gives, get whole messages back. It holds
    at most one partial frame (<= max_frame + 4 bytes) besides the chunk just fed."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self.broken = False

    def feed(self, data: bytes) -> list[Message | FrameError]:
        if self.broken:
            return [FrameError("the stream ended at an oversized frame", fatal=True)]
        self._buf += data
        items, used, self.broken = _scan(self._buf, self.max_frame)
        if self.broken:
            self._buf.clear()
        else:
            del self._buf[:used]
        return items

    @property
    def pending(self) -> int:
        return len(self._buf)
