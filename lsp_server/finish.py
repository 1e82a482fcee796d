"""Model text to shown text, for the inline items and the editing commands: the finishing steps
of the engine package (infill_engine/finish: postprocess, then the syntax check on the whole
document), which `dllm-infill fill` runs too, so the CLI prints what the editor shows."""

from infill_engine.finish import finish

__all__ = ["finish"]
