"""The engine clients: what the language server asks of an engine, and each engine that answers.

engine_client.py (the `EngineClient` protocol: a hole in, the fills out; its bookkeeping),
backend.py (which client is in use, its load and state: the one writer of both, each client
reporting through a `Port` of its own),
local_engine.py (the in-process engine: planning, the context, its scheduler),
remote_engine.py, remote.py, http_remote.py and window.py (a `dllm-infill serve` service, a thin
client: no tokenizer, no torch), fim_remote.py (an OpenAI-compatible FIM API). Nothing here
imports the rest of the server but options.py and positions.py.
"""
