"""The engines: what the language server asks of an engine, and each client that
answers, named for what it talks to.

engine_client.py (the `EngineClient` protocol: a hole in, the fills out; its bookkeeping),
backend.py (which client is in use, its load and state: the one writer of both, each client
reporting through a `Port` of its own), daemon.py (the load, and the index's build, on daemon
threads), in_process.py (the engine in this process: planning, the context, its scheduler),
engine_service.py (a `dllm-infill serve` service: a thin client, no tokenizer, no torch) over
link.py (the msgpack connection and what every transport shares) or http_link.py (HTTP), with
window.py (the part of the document sent), hosted_fim.py (an OpenAI-compatible FIM API),
hosted_edit.py and edit_prompt.py (a hosted next-edit API, Mercury Edit, and its prompt),
untrusted.py (a remote's answer as hostile input), backoff.py (waiting between tries). Nothing here
imports the rest of the server but options.py and workspace/positions.py.
"""
