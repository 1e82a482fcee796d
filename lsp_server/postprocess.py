"""The finishing text steps, as the server's modules name them: they live in the engine package
(infill_engine/finish/postprocess.py), so that `dllm-infill fill` prints what the editor shows."""

from infill_engine.finish.postprocess import (
    Indent,
    detect_indent,
    drop_closed_brackets,
    drop_suffix_overlap,
    formatting_indent,
    postprocess,
    reindent,
    trim_trailing_blank,
)

__all__ = [
    "Indent",
    "detect_indent",
    "drop_closed_brackets",
    "drop_suffix_overlap",
    "formatting_indent",
    "postprocess",
    "reindent",
    "trim_trailing_blank",
]
