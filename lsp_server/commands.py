"""The editing commands: fill a function body, regenerate a selection, refine a selection.

Each is a plain function from a document to an `Edit` (a replaced range and its new text) so it
can be tested in-process; the server turns edits into `workspace/applyEdit` requests.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from . import syntax
from .backend import Backend
from .context import build_context
from .options import Options, infill_params
from .postprocess import detect_indent, drop_suffix_overlap, reindent, trim_trailing_blank


class CommandError(Exception):
    """A command that cannot run here, with a message for the user."""


@dataclass(frozen=True)
class Edit:
    start: int  # str offsets into the document
    end: int
    text: str
    what: str  # for the user: what was done


def _span_for(backend: Backend, old: str, opts: Options, floor: int) -> int:
    """Room for the old text's length and a quarter more, within the model's positions."""
    engine = backend.ready_engine()
    n = len(engine.encode(old)) if old.strip() else 0
    limit = max(8, engine.args.max_positions // 2)
    return max(1, min(max(floor, n + n // 4), limit, max(opts.decode.max_span, floor)))


def _context(backend: Backend, text: str, start: int, end: int, opts: Options) -> tuple[str, str]:
    ctx = build_context(
        text[:start] + text[end:],
        start,
        backend.token_spans,
        opts.context.prefix_tokens,
        opts.context.suffix_tokens,
    )
    return ctx.prefix, ctx.suffix


def _tidy(raw: str, prefix: str, suffix: str, indent: str) -> str:
    doc = detect_indent(prefix + suffix)
    text = trim_trailing_blank(drop_suffix_overlap(raw, suffix))
    text = reindent(text, detect_indent(text), doc) if "\n" in text else text
    if text and indent and not text.startswith((" ", "\t")):
        text = indent + text.lstrip()
    return text


async def fill_function_body(
    backend: Backend, text: str, offset: int, language_id: str, opts: Options
) -> Edit:
    hole = syntax.function_body(text, offset, language_id)
    if hole is None:
        raise CommandError("no function around the cursor (or no grammar for this language)")
    prefix, suffix = _context(backend, text, hole.start, hole.end, opts)
    span = _span_for(backend, text[hole.start : hole.end], opts, floor=48)
    r = await backend.infill(prefix, suffix, infill_params(opts.decode, span, 4), threading.Event())
    body = _tidy(r.text, prefix, suffix, hole.indent)
    if not body.strip():
        raise CommandError(f"the model wrote nothing for {hole.name}()")
    if hole.start == hole.end and not body.endswith("\n"):
        body += "\n"  # inserted at a line start, before the next line
    return Edit(hole.start, hole.end, body, f"filled the body of {hole.name}()")


async def regenerate_selection(
    backend: Backend, text: str, start: int, end: int, instruction: str | None, opts: Options
) -> Edit:
    if end <= start or not text[start:end].strip():
        raise CommandError("select some code to regenerate")
    prefix, suffix = _context(backend, text, start, end, opts)
    line_start = prefix.rfind("\n") + 1
    head = prefix[line_start:]  # the selection's line before it: its indentation, if blank
    indent = head[: len(head) - len(head.lstrip())]
    if instruction and instruction.strip():
        # A base code model follows intent best as a comment just before the code; the comment
        # is context only and never enters the document.
        note = f"# {' '.join(instruction.split())}\n"
        prefix = prefix[:line_start] + indent + note + prefix[line_start:]
    span = _span_for(backend, text[start:end], opts, floor=16)
    r = await backend.infill(prefix, suffix, infill_params(opts.decode, span, 2), threading.Event())
    new = _tidy(r.text, prefix, suffix, "")
    if not new.strip():
        raise CommandError("the model wrote nothing for the selection")
    return Edit(start, end, new, "regenerated the selection")


async def refine_selection(
    backend: Backend, text: str, start: int, end: int, opts: Options, fraction: float = 0.25
) -> Edit:
    old = text[start:end]
    if not old.strip():
        raise CommandError("select some code to refine")
    prefix, suffix = _context(backend, text, start, end, opts)
    p = infill_params(opts.decode, 1)  # refine sets the span and holds end tokens off itself
    r = await backend.refine(prefix, old, suffix, fraction, p, threading.Event())
    return Edit(start, end, r.text, f"refined {r.changed} of {len(r.remasked)} unlikely tokens")
