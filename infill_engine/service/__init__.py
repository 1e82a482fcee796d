"""`dllm-infill serve`: one engine for many editors, over a Unix socket or TCP (docs/service.md).

One module per concept: frames (the byte stream), listen (addresses, tokens, sockets), wire (the
messages: checks and replies), connection (one client), front (the service its connections
share), run (listening, a service thread), client (a blocking client).

The names below are imported on first use (PEP 562 `__getattr__`), each from its own module: a
client that needs the frames, an address or the wire (the language server) imports neither the
HTTP front (starlette, uvicorn) nor the metrics (prometheus_client) with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
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
    from .front import (
        HANDSHAKE_TIMEOUT_S,
        MAX_CONNECTIONS,
        MAX_INFLIGHT,
        OUTBOX,
        Service,
    )
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

# a lazily imported name -> the module that defines it
_HOMES = {
    "CHUNK": "frames",
    "HANDSHAKE_TIMEOUT_S": "front",
    "HEADER": "frames",
    "MAX_CONNECTIONS": "front",
    "MAX_FRAME": "frames",
    "MAX_ID_CHARS": "wire",
    "MAX_INFLIGHT": "front",
    "OUTBOX": "front",
    "PARAM_FIELDS": "wire",
    "PROTOCOL_VERSION": "wire",
    "STOP_FIELDS": "wire",
    "TOKEN_ENV": "listen",
    "Address": "listen",
    "BadRequest": "wire",
    "Connection": "connection",
    "FrameError": "frames",
    "FrameReader": "frames",
    "Message": "frames",
    "RequestId": "wire",
    "ServeError": "listen",
    "Service": "front",
    "ServiceClient": "client",
    "ServiceCounters": "connection",
    "ServiceError": "wire",
    "ServiceThread": "run",
    "WirePlan": "wire",
    "bind_unix": "listen",
    "check_listen": "listen",
    "decode_frames": "frames",
    "decode_payload": "frames",
    "encode_frame": "frames",
    "error": "wire",
    "hello": "wire",
    "is_loopback": "listen",
    "parse_address": "listen",
    "parse_id": "wire",
    "parse_params": "wire",
    "parse_plan": "wire",
    "read_token_file": "listen",
    "reply_error": "wire",
    "resolve_token": "listen",
    "result_dict": "wire",
    "serve": "run",
    "socket_mode": "listen",
}


__getattr__, __dir__ = exports(__name__, _HOMES, __all__)
