"""The editing commands: fill a function body, regenerate a selection, refine a selection.

Each is a plain function from a document to an `Edit` (a replaced range and its new text) so it
can be tested in-process; the server turns edits into `workspace/applyEdit` requests.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import grammars
from infill_engine.context import Context, build_context
from infill_engine.planner import SpanPlan

from . import syntax
from .backend import Backend
from .finish import finish
from .options import Options, infill_params, span_plan


class CommandError(Exception):
    """A command that cannot run here, with a message for the user."""


@dataclass(frozen=True)
class Edit:
    start: int  # str offsets into the document
    end: int
    text: str
    what: str  # for the user: what was done


def _context(backend: Backend, text: str, start: int, end: int, plan: SpanPlan) -> Context:
    return build_context(
        text[:start] + text[end:], start, backend.tokenize, plan.prefix_tokens, plan.suffix_tokens
    )


def _checked(edit: Edit, text: str, language_id: str) -> Edit:
    """The edit, unless it adds a syntax error to the document (syntax.Check): then the user is
    told why and nothing is applied."""
    if not syntax.Check(_around(text, edit.start, edit.end), language_id).clean(edit.text):
        raise CommandError("not applied: the model's text would add a syntax error to the document")
    return edit


def _around(text: str, start: int, end: int) -> syntax.Around:
    """The document around the range [start, end) that an edit replaces."""
    return syntax.Around(text[:start], text[end:], text[start:end])


async def fill_function_body(
    backend: Backend, text: str, offset: int, language_id: str, opts: Options
) -> Edit:
    hole = syntax.function_body(text, offset, language_id)
    if hole is None:
        raise CommandError("no function around the cursor (or no grammar for this language)")
    # Planned as the empty body it is about to be: the cursor on a blank line of the body.
    blank = hole.indent + "\n"
    body_plan = span_plan(
        opts,
        backend.ready_engine(),
        text[: hole.start] + blank + text[hole.end :],
        hole.start + len(hole.indent),
        language_id,
    )
    ctx = _context(backend, text, hole.start, hole.end, body_plan)
    prefix, suffix = ctx.prefix, ctx.suffix
    p = infill_params(opts.decode, opts.decode.span or body_plan.span, 4)
    r = await backend.infill(
        prefix, suffix, p, threading.Event(), body_plan, priority="command", ids=ctx.ids
    )
    body = finish(
        r.text,
        prefix,
        suffix,
        language_id,
        block_indent=hole.indent,
        document=_around(text, hole.start, hole.end),
    )
    if body is None:
        raise CommandError(f"the model wrote nothing usable for {hole.name}()")
    at_line_start = hole.start == hole.end or text[hole.start : hole.end].endswith("\n")
    if at_line_start and not body.endswith("\n"):
        body += "\n"  # the next line (the closing brace, the next def) stays on its own line
    return _checked(
        Edit(hole.start, hole.end, body, f"filled the body of {hole.name}()"), text, language_id
    )


async def regenerate_selection(
    backend: Backend,
    text: str,
    start: int,
    end: int,
    instruction: str | None,
    opts: Options,
    language_id: str,
) -> Edit:
    if end <= start or not text[start:end].strip():
        raise CommandError("select some code to regenerate")
    plan = span_plan(opts, backend.ready_engine(), text, start, language_id, end=end)
    ctx = _context(backend, text, start, end, plan)
    prefix, suffix = ctx.prefix, ctx.suffix  # text, not ids: the instruction may join the prefix
    line_start = prefix.rfind("\n") + 1
    head = prefix[line_start:]  # the selection's line before it: its indentation, if blank
    indent = head[: len(head) - len(head.lstrip())]
    what = "regenerated the selection"
    if instruction and instruction.strip():
        # A base code model follows intent best as a comment just before the code, in the
        # language's own comment syntax; the comment is context only and never enters the
        # document.
        spec = grammars.spec(language_id)
        if spec is not None:
            note = f"{spec.line_comment} {' '.join(instruction.split())}\n"
            prefix = prefix[:line_start] + indent + note + prefix[line_start:]
        else:
            what += f" (without the instruction: no comment syntax is known for {language_id})"
    p = infill_params(opts.decode, opts.decode.span or plan.span, 2)
    r = await backend.infill(prefix, suffix, p, threading.Event(), plan, priority="command")
    new = finish(
        r.text, prefix, suffix, language_id, block_indent="", document=_around(text, start, end)
    )
    if new is None:
        raise CommandError("the model wrote nothing usable for the selection")
    return _checked(Edit(start, end, new, what), text, language_id)


async def refine_selection(
    backend: Backend,
    text: str,
    start: int,
    end: int,
    opts: Options,
    language_id: str,
    fraction: float = 0.25,
) -> Edit:
    old = text[start:end]
    if not old.strip():
        raise CommandError("select some code to refine")
    plan = span_plan(opts, backend.ready_engine(), text, start, language_id, end=end)
    ctx = _context(backend, text, start, end, plan)
    prefix, suffix = ctx.prefix, ctx.suffix
    p = infill_params(opts.decode, 1)  # refine sets the span and holds end tokens off itself
    r = await backend.refine(prefix, old, suffix, fraction, p, threading.Event())
    what = f"refined {r.changed} of {len(r.remasked)} unlikely tokens"
    return _checked(Edit(start, end, r.text, what), text, language_id)
