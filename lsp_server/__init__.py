"""Language server for diffusion code infill: LSP 3.18 in front of `infill_engine`.

In rooms, along the request: protocol/ (frames, JSON-RPC checks, TCP, the handlers, the
session, telemetry, the index's handlers), workspace/ (open documents, positions, trees, the
workspace's files and index, the cross-file chunk store), completion/ (inline completion, the
cursor rule, debounce, snooze, the typed-ahead cache), commands/ (fill body, regenerate, refine;
function bodies, stubs), engines/ (the engine clients: which engine is in use, its load and
state; in process, a `dllm-infill serve` service, a hosted FIM API), options.py (settings),
cli.py (`dllm-infill-ls`). The finishing steps are infill_engine/finish's. Rooms import one way:
protocol -> completion, commands -> engines -> workspace, options.
"""
