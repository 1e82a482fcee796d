"""The protocol: the language server's wiring, from bytes to handlers, and its session.

handlers.py: the handlers, thin, registered by `build_server`.
jsonrpc.py: where JSON-RPC messages meet pygls: each one checked first.
transport.py: bytes to messages: the resynchronising frame reader (stdio, TCP).
tcp.py: the server over TCP, behind a token gate.
session.py: `DllmServer`: one session's state and shared services.
telemetry.py: acceptance statistics, kept on this machine.
indexing.py: the workspace index's handlers: its build, watched files.
"""
