"""Language server for diffusion code infill: LSP 3.18 in front of `infill_engine`.

Module map: transport.py (frames), protocol.py (JSON-RPC messages meet pygls), tcp.py,
server.py (thin handlers), documents.py (open documents, incremental sync), backend.py (the
engine's lifecycle and worker thread), completion.py (inline completion), commands.py (fill
body, regenerate, refine), context.py (prefix/suffix budgets), postprocess.py, typeahead.py,
debounce.py, syntax.py (tree-sitter), options.py (settings), positions.py (the one owner of
coordinate conversions).
"""
