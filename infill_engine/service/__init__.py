"""`dllm-infill serve`: one engine for many editors, over a Unix socket or TCP (docs/service.md).

One module per concept: frames (the byte stream), listen (addresses, tokens, sockets), wire (the
messages: checks and replies), connection (one client), front (the service its connections
share), run (listening, a service thread), client (a blocking client).
"""

from __future__ import annotations

from .client import ServiceClient
from .connection import Connection, ServiceCounters
from .frames import (
    CHUNK,
    HEADER,
    MAX_FRAME,
    FrameError,
    FrameReader,
    Message,
    decode_frames,
    decode_payload,
    encode_frame,
)
from .front import HANDSHAKE_TIMEOUT_S, MAX_CONNECTIONS, MAX_INFLIGHT, OUTBOX, Service
from .listen import (
    TOKEN_ENV,
    Address,
    ServeError,
    bind_unix,
    check_listen,
    is_loopback,
    parse_address,
    read_token_file,
    resolve_token,
    socket_mode,
)
from .run import ServiceThread, serve
from .wire import (
    MAX_ID_CHARS,
    PARAM_FIELDS,
    PROTOCOL_VERSION,
    STOP_FIELDS,
    BadRequest,
    RequestId,
    ServiceError,
    WirePlan,
    error,
    hello,
    parse_id,
    parse_params,
    parse_plan,
    reply_error,
    result_dict,
)

__all__ = [
    "CHUNK",
    "HANDSHAKE_TIMEOUT_S",
    "HEADER",
    "MAX_CONNECTIONS",
    "MAX_FRAME",
    "MAX_ID_CHARS",
    "MAX_INFLIGHT",
    "OUTBOX",
    "PARAM_FIELDS",
    "PROTOCOL_VERSION",
    "STOP_FIELDS",
    "TOKEN_ENV",
    "Address",
    "BadRequest",
    "Connection",
    "FrameError",
    "FrameReader",
    "Message",
    "RequestId",
    "ServeError",
    "Service",
    "ServiceClient",
    "ServiceCounters",
    "ServiceError",
    "ServiceThread",
    "WirePlan",
    "bind_unix",
    "check_listen",
    "decode_frames",
    "decode_payload",
    "encode_frame",
    "error",
    "hello",
    "is_loopback",
    "parse_address",
    "parse_id",
    "parse_params",
    "parse_plan",
    "read_token_file",
    "reply_error",
    "resolve_token",
    "result_dict",
    "serve",
    "socket_mode",
]
