"""The editing commands: fill a function body, regenerate a selection, refine a selection.

Each is a plain function from a document to an `Edit` (a replaced range and its new text) so it
can be tested in-process; the server turns edits into `workspace/applyEdit` requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import grammars
from infill_engine.finish import finish, syntax
from infill_engine.params import InfillParams

from ..engines.backend import Backend
from ..engines.engine_client import Hole
from ..options import Options, decode_params
from . import function_bodies, stubs


class CommandError(Exception):
    """A command that cannot run here, with a message for the user."""


@dataclass(frozen=True)
class Edit:
    start: int  # str offsets into the document
    end: int
    text: str
    what: str  # for the user: what was done
    # Set when the edit overwrites code the user did not select: why the editor must ask first
    # (an LSP change annotation with needsConfirmation). None: applied at once.
    confirm: str | None = None


def _ask_first(
    text: str,
    start: int,
    end: int,
    language_id: str,
    chosen: tuple[int, int] | None,
    can_confirm: bool,
    what: str,
) -> str | None:
    """None when replacing [start, end) overwrites only what the user chose, blank lines,
    comments or placeholders (stubs.py); else the question for the editor to ask. An editor
    that cannot ask (no change annotation support) gets a refusal, before the model runs."""
    if not stubs.needs_confirmation(text, start, end, language_id, chosen):
        return None
    if not can_confirm:
        raise CommandError(
            f"not applied: {what} has code, and this editor cannot ask before replacing it "
            "(no change annotation support); clear it, or select it and regenerate the selection"
        )
    return f"Replace {what}? It has code."


async def _fill(
    backend: Backend,
    text: str,
    offset: int,
    end: int | None,
    language_id: str,
    opts: Options,
    min_tokens: int,
    block_indent: str,
    around: syntax.Around,
) -> str | None:
    """One fill of a hole at command priority, planned and cut by the engine, finished against
    the context the model saw (None: nothing usable)."""
    hole = _hole(text, offset, end, language_id, opts, decode_params(opts.decode, min_tokens))
    filled = await backend.fill(hole)
    prefix, suffix = filled.context(hole)
    first = filled.results[0].text
    return finish(first, prefix, suffix, language_id, block_indent=block_indent, document=around)


def _hole(
    text: str, offset: int, end: int | None, language_id: str, opts: Options, params: InfillParams
) -> Hole:
    """A command's hole: command priority, one fill, the context settings' budgets, no drafts."""
    ctx = opts.context
    return Hole(
        text,
        offset,
        end,
        language_id,
        "command",
        prefix_tokens=ctx.prefix_tokens,
        suffix_tokens=ctx.suffix_tokens,
        params=params,
        drafting=False,
    )


def checked(edit: Edit, text: str, language_id: str) -> Edit:
    """The edit, unless it adds a syntax error to the document (syntax.Check): then the user is
    told why and nothing is applied. Every command's edit passes through it last; public so
    that the rule can be tested on its own (tests/lsp/test_syntax_check.py)."""
    if not syntax.Check(_around(text, edit.start, edit.end), language_id).clean(edit.text):
        raise CommandError("not applied: the model's text would add a syntax error to the document")
    return edit


def _around(text: str, start: int, end: int) -> syntax.Around:
    """The document around the range [start, end) that an edit replaces."""
    return syntax.Around(text[:start], text[end:], text[start:end])


async def fill_function_body(
    backend: Backend,
    text: str,
    offset: int,
    language_id: str,
    opts: Options,
    can_confirm: bool = True,
) -> Edit:
    """The body filled: at once when it is empty or a stub, else as an edit the editor must
    confirm (`can_confirm`), or refused."""
    hole = function_bodies.function_body(text, offset, language_id)
    if hole is None:
        raise CommandError("no function around the cursor (or no grammar for this language)")
    what = f"the body of {hole.name}()"
    confirm = _ask_first(text, hole.start, hole.end, language_id, None, can_confirm, what)
    # The body is about to be empty: the engine sees the cursor on an indented blank line of
    # it, which it plans as the empty body it is (`function_body`) and cuts the context around.
    blank = hole.indent + ("" if text.startswith("\n", hole.end) else "\n")
    empty = text[: hole.start] + blank + text[hole.end :]
    at = hole.start + len(hole.indent)
    around = _around(text, hole.start, hole.end)
    body = await _fill(backend, empty, at, None, language_id, opts, 4, hole.indent, around)
    if body is None:
        raise CommandError(f"the model wrote nothing usable for {hole.name}()")
    at_line_start = hole.start == hole.end or text[hole.start : hole.end].endswith("\n")
    if at_line_start and not body.endswith("\n"):
        body += "\n"  # the next line (the closing brace, the next def) stays on its own line
    edit = Edit(hole.start, hole.end, body, f"filled {what}", confirm)
    return checked(edit, text, language_id)


async def regenerate_selection(
    backend: Backend,
    text: str,
    start: int,
    end: int,
    instruction: str | None,
    opts: Options,
    language_id: str,
    can_confirm: bool = True,
) -> Edit:
    if end <= start or not text[start:end].strip():
        raise CommandError("select some code to regenerate")
    # The edit is the selection itself: no question, unless that ever changes.
    confirm = _ask_first(text, start, end, language_id, (start, end), can_confirm, "the code")
    sent, at, stop = text, start, end
    what = "regenerated the selection"
    if instruction and instruction.strip():
        # A base code model follows intent best as a comment just before the code, in the
        # language's own comment syntax, at the indentation of the selection's line; the
        # comment is context only and never enters the document.
        spec = grammars.spec(language_id)
        if spec is not None:
            line_start = text.rfind("\n", 0, start) + 1
            head = text[line_start:start]  # the selection's line before it
            indent = head[: len(head) - len(head.lstrip())]
            note = f"{indent}{spec.line_comment} {' '.join(instruction.split())}\n"
            sent = text[:line_start] + note + text[line_start:]
            at, stop = start + len(note), end + len(note)
        else:
            what += f" (without the instruction: no comment syntax is known for {language_id})"
    around = _around(text, start, end)
    new = await _fill(backend, sent, at, stop, language_id, opts, 2, "", around)
    if new is None:
        raise CommandError("the model wrote nothing usable for the selection")
    return checked(Edit(start, end, new, what, confirm), text, language_id)


async def refine_selection(
    backend: Backend,
    text: str,
    start: int,
    end: int,
    opts: Options,
    language_id: str,
    fraction: float = 0.25,
    can_confirm: bool = True,
) -> Edit:
    if not text[start:end].strip():
        raise CommandError("select some code to refine")
    confirm = _ask_first(text, start, end, language_id, (start, end), can_confirm, "the code")
    # refine sets the span and holds end tokens off itself
    hole = _hole(text, start, end, language_id, opts, decode_params(opts.decode))
    r = await backend.refine(hole, fraction)
    what = f"refined {r.changed} of {len(r.remasked)} unlikely tokens"
    return checked(Edit(start, end, r.text, what, confirm), text, language_id)
