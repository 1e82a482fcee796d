"""Model text to shown text, one pipeline for the inline items and the editing commands: the
text steps of postprocess.py on the model's context, then the syntax check (syntax.fit) on the
document itself, so that nothing shown or applied adds a syntax error to the document."""

from __future__ import annotations

from . import syntax
from .postprocess import Indent, postprocess


def finish(
    raw: str,
    prefix: str,
    suffix: str,
    language_id: str,
    block_indent: str | None = None,
    *,
    document: syntax.Around | None = None,
    one_line: bool = False,
    indent: Indent | None = None,
) -> str | None:
    """The text to insert between prefix and suffix (the model's context), or None when nothing
    clean is left.

    The syntax check reads `document`, the whole document around the insertion: the context is
    trimmed to token budgets, often mid-string or mid-docstring, so it may not parse on its own,
    and a new error can hide in one it already has. Without a document, the context stands in
    for it.
    """
    text = postprocess(
        raw, prefix, suffix, block_indent=block_indent, one_line=one_line, indent=indent
    )
    if text is None:
        return None
    around = document if document is not None else syntax.Around(prefix, suffix)
    text = syntax.fit(around.before, text, around.after, language_id, around.replaced)
    return text if text.strip() else None
