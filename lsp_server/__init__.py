"""Language server for diffusion code infill: LSP 3.18 in front of `infill_engine`.

Module map: transport.py (frames), protocol.py (JSON-RPC messages meet pygls), tcp.py,
server.py (thin handlers), session.py (the session's state), documents.py (open documents,
incremental sync), trees.py, engines/ (the engine clients: which engine is in use, its load
and state; in process, a `dllm-infill serve` service, an OpenAI-compatible FIM API),
completion.py (inline completion), commands.py (fill body, regenerate,
refine), finish.py, postprocess.py, typeahead.py, debounce.py,
syntax.py (tree-sitter, the syntax check), options.py (settings), positions.py (the one owner
of coordinate conversions), bench.py.
"""
