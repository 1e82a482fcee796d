"""Model text to shown text: what an editor shows of a fill, and what `dllm-infill fill` prints.

One pipeline for the language server's inline items, its editing commands and the CLI: the text
steps of postprocess.py (line endings, the mid-line rule, reindentation, repetition loops,
overlap with the suffix, whitespace) on the model's context, then the syntax check (syntax.fit)
on the document itself, so that nothing shown or applied adds a syntax error to the document,
nothing shown repeats itself (repeat.repeats: the text steps cut loops and stutters, and what
still holds one after them goes), whatever the language, and nothing that looks like a credential
is shown (secrets.py; counted in secrets.FILTERED).
No torch here: the language server without a local model (`engineAddress`) imports it too.
"""

from __future__ import annotations

import grammars

from ..repeat import repeats
from . import syntax
from .postprocess import Indent, postprocess
from .secrets import held_back
from .syntax import Around

__all__ = ["Around", "Indent", "finish"]


def finish(
    raw: str,
    prefix: str,
    suffix: str,
    language_id: str,
    block_indent: str | None = None,
    *,
    document: Around | None = None,
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
    spec = grammars.spec(language_id)  # its comment mark, as the planner gives the stop rule
    comment = spec.line_comment if spec is not None else "#"
    text = postprocess(
        raw,
        prefix,
        suffix,
        block_indent=block_indent,
        one_line=one_line,
        indent=indent,
        comment=comment,
    )
    if text is None:
        return None
    around = document if document is not None else Around(prefix, suffix)
    text = syntax.fit(around.before, text, around.after, language_id, around.replaced, around.tree)
    if not text.strip() or repeats(text) is not None:
        return None
    return None if held_back(text) else text
