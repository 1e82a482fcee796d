"""`dllm-infill-ls` with a record of what it reads: every path it opens or lists and every module
it imports, one JSON line each, appended to the file $DLLM_AUDIT names (Python's audit hooks,
PEP 578). Native code (the Rust tokenizer, safetensors, torch) reads files only after its Python
module is imported, so "no such import and no such path" means no model file was read.

Run as the server itself: python tests/tools/audited_ls.py [dllm-infill-ls arguments]
(tests/lsp/test_thin_remote.py does)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

PATH_EVENTS = ("open", "os.listdir", "os.scandir")


def install(path: str) -> None:
    log = open(path, "a", buffering=1)  # noqa: SIM115  # open for the process's whole life
    busy = False

    def hook(event: str, args: tuple[Any, ...]) -> None:
        nonlocal busy
        if busy or not args:
            return
        if event in PATH_EVENTS and isinstance(args[0], str | bytes):
            record = {"event": event, "path": os.fsdecode(args[0])}
        elif event == "import" and isinstance(args[0], str):
            record = {"event": "import", "module": args[0]}
        else:
            return
        busy = True
        try:
            log.write(json.dumps(record) + "\n")
        finally:
            busy = False

    sys.addaudithook(hook)


if __name__ == "__main__":
    install(os.environ["DLLM_AUDIT"])
    from lsp_server.cli import main

    sys.exit(main(sys.argv[1:]))
