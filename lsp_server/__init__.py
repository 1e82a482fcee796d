"""Language server for diffusion code infill: LSP 3.18 in front of `infill_engine`.

Module map: transport.py (frames), protocol.py (JSON-RPC messages meet pygls), tcp.py,
server.py (thin handlers), session.py (the session's state), documents.py (open documents,
incremental sync), trees.py, backend.py (which engine is in use, its load and state),
engine_client.py (the engine-client protocol: a hole in, the fills out; its bookkeeping),
local_engine.py (the in-process engine: planning, the context, its scheduler), remote_engine.py,
remote.py, http_remote.py and window.py (a `dllm-infill serve` service, a thin client: no
tokenizer, no torch), completion.py (inline completion), commands.py (fill body, regenerate,
refine), finish.py, postprocess.py, typeahead.py, debounce.py,
syntax.py (tree-sitter, the syntax check), options.py (settings), positions.py (the one owner
of coordinate conversions), bench.py.
"""
