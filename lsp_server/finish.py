"""Model text to shown text, one pipeline for the inline items and the editing commands: the
text steps of postprocess.py, then the syntax check (syntax.fit), so that nothing shown or
applied adds a syntax error to the document."""

from __future__ import annotations

from . import syntax
from .postprocess import postprocess


def finish(
    raw: str, prefix: str, suffix: str, language_id: str, block_indent: str | None = None
) -> str | None:
    """The text to insert between prefix and suffix, or None when nothing clean is left."""
    text = postprocess(raw, prefix, suffix, block_indent=block_indent)
    if text is None:
        return None
    text = syntax.fit(prefix, text, suffix, language_id)
    return text if text.strip() else None
