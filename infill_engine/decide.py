"""What the user sees: the one step that turns the model's fills and the drafts into the texts
an editor shows, best first. Every front calls it and none decides on its own: the language
server's inline items (lsp_server/completion/inline.py), `dllm-infill fill`, and the engine
service's routes (the native call's `shown`, llama.cpp's `/infill`, OpenAI's `/v1/completions`).

In order:
0. The names just renamed (`Seen.renamed`, edits/renames.py: the edit history's renames at a
   binding whose scope holds the cursor) are written as their new names in every fill and
   draft: a line copied from where the rename has not reached yet reads the old one.
1. Whether the model's fills can be shown at all (`Policy.model_shown`), known before the model
   runs: an automatic trigger shows an untrusted model's fills never (drafts.rank), so a caller
   that knows it skips the model pass and decides on the drafts alone.
2. Every candidate is finished (finish/): the fills on the context the model saw, the drafts on
   the document, both checked against the whole document, in the editor's indentation (given,
   or read from the document), one line where the hole wants one. What the finish empties goes.
3. Vetoes (`vetoed`), in Python: the drafts that read a name nothing binds where they land
   (Python's symbol table, finish/unbound.py), and the imports that add nothing (a name
   imported already; unasked, a name the code does not use: drafts/imports.py) are never
   shown. They stay in the list the gate reads: a competitor taken away would make the next
   draft look surer than it is.
4. The ranking and the gate (drafts.rank.choose): which drafts are sure enough to show unasked,
   whether the model is trusted, the order for an invoked request.

What the step reads travels with the hole (`Seen`): the document around the insertion, the
context the model saw, the language and the planned kind; what is typed before the cursor is
read from the document here, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .drafts.draft import Draft
from .drafts.imports import adds_nothing, imported_names, imports_and_uses, is_python
from .drafts.rank import FLOOR, Choice, choose
from .edits.renames import Renames, rename
from .finish import finish
from .finish.postprocess import Indent
from .finish.syntax import Around, Check

__all__ = ["BODY_KINDS", "Choice", "Policy", "Seen", "decide", "finished", "trusted", "vetoed"]

# The context the text steps read around a cursor where no model's context says (about that of
# the default budgets, 1024 tokens before and 512 after).
CONTEXT_CHARS = 8000

# Planned hole kinds (planner.kinds) where an automatic completion may run over several lines.
BODY_KINDS = frozenset({"block_body", "function_body", "empty_body"})


@dataclass(frozen=True)
class Seen:
    """The hole as the decision reads it. `document`: the whole text around the insertion (the
    syntax check reads it: the model's context is cut to token budgets, often mid-string);
    `prefix` and `suffix`: the context the model saw (the text steps read it); `kind`: the
    planned hole kind ("" when nothing was planned); `renamed`: the names the edits just made
    renamed where the cursor is (edits/renames.py), none where no history is kept."""

    document: Around
    prefix: str
    suffix: str
    language_id: str
    kind: str = ""
    renamed: Renames = ()

    @classmethod
    def whole(
        cls,
        text: str,
        offset: int,
        language_id: str,
        kind: str = "",
        renamed: Renames = (),
        tree: Any | None = None,
    ) -> Seen:
        """A hole in `text` with no model's context to go by (none ran, or it saw all of it):
        the text steps read the lines within CONTEXT_CHARS of the cursor, as they would read a
        model's context (reading a 2 MB document whole, eight drafts over, took seconds).
        `tree`: text's tree-sitter tree, where the caller keeps one (syntax.Around)."""
        start = text.find("\n", max(0, offset - CONTEXT_CHARS), offset) + 1
        end = text.rfind("\n", offset, offset + CONTEXT_CHARS)
        end = len(text) if end < 0 or offset + CONTEXT_CHARS >= len(text) else end
        before, after = text[:offset], text[offset:]
        context = text[start:offset], text[offset:end]
        return cls(Around(before, after, tree=tree), *context, language_id, kind, renamed)

    @property
    def typed(self) -> str:
        """What is typed on the cursor's line before it, after the indentation (the gate reads
        it)."""
        before = self.document.before
        return before[before.rfind("\n") + 1 :].lstrip(" \t")


@dataclass(frozen=True)
class Policy:
    """How the caller asks. `automatic`: as the user types (else invoked: the user asked);
    `trust_model`: the model's fills may be shown unasked, and agreeing with a draft counts
    (`trusted`); `gate`: the drafts' confidence an automatic trigger needs (drafts.gate; None:
    the threshold calibrated for the language, drafts/gate.py);
    `indent`: the editor's indentation unit, when it sent one; `limit`: texts at most (0: all);
    `model_knows`: the model knows the document's language (languages.py): else its fills are
    never shown, and the drafts alone are."""

    automatic: bool
    trust_model: bool
    gate: float | None = None
    indent: Indent | None = None
    limit: int = 0
    model_knows: bool = True

    @property
    def model_shown(self) -> bool:
        """Whether any fill of the model can be among what is shown: known before it runs."""
        return self.model_knows and (self.trust_model or not self.automatic)


def trusted(model: str, remote: bool = False, setting: bool | None = None) -> bool:
    """Whether a model's fills are shown unasked: the setting when there is one, else every
    model but the builtin one (its fills are rarely right, docs/drafts.md), and an engine
    elsewhere (it serves a model of its operator's choosing)."""
    if setting is not None:
        return setting
    return remote or model != "builtin"


def decide(
    fills: Sequence[str], found: Sequence[Draft], seen: Seen, policy: Policy
) -> list[Choice]:
    """The texts to show, best first, each once: `fills` the model's raw texts (one per
    candidate, best first), `found` the drafts, best first. Empty when nothing is worth
    showing."""
    one_line = policy.automatic and seen.kind not in BODY_KINDS
    shown: list[str] = []
    if seen.renamed:
        found = _renamed(found, seen.renamed)
    if policy.model_shown:
        for raw in fills:
            text = _finish(rename(raw, seen.renamed), seen, policy.indent, one_line)
            if text and text not in shown:
                shown.append(text)
    drafts = finished(found, seen, policy.indent)
    chosen = choose(
        shown,
        drafts,
        policy.automatic,
        policy.gate,
        policy.trust_model,
        typed=seen.typed,
        language_id=seen.language_id,
        vetoed=vetoed(drafts, seen, policy.automatic),
    )
    return chosen[: policy.limit] if policy.limit else chosen


def finished(found: Sequence[Draft], seen: Seen, indent: Indent | None = None) -> list[Draft]:
    """The drafts finished as `decide` finishes them, those the finish empties dropped (what
    the gate reads: the calibration of drafts.gate reads it too)."""
    out: list[Draft] = []
    for d in found:
        # A line draft is the rest of the cursor's line and stays one line; a body keeps its
        # lines. The text steps read the context, the syntax check the whole document.
        lone = "\n" not in d.text
        text = _finish(d.text, seen, indent, lone)
        if text:
            out.append(replace(d, text=text))
    return out


def _renamed(found: Sequence[Draft], pairs: Renames) -> list[Draft]:
    """The drafts with the renamed names written new, each text once (the first, best)."""
    out: dict[str, Draft] = {}
    for d in found:
        text = rename(d.text, pairs)
        out.setdefault(text, d if text == d.text else replace(d, text=text))
    return list(out.values())


def vetoed(drafts: Sequence[Draft], seen: Seen, automatic: bool) -> frozenset[str]:
    """The texts of the finished drafts that could be shown (the first, and those over the
    floor) that are never shown, in Python (none in other languages):
    - a line that reads a name nothing binds where it would land (Python's symbol table,
      finish/unbound.py): a line copied from elsewhere that does belongs elsewhere (`return s`
      where no `s` is bound raises NameError);
    - an import that adds nothing (imports.adds_nothing): it imports a name the module imports
      already, or, unasked (`automatic`), one the code does not use."""
    if not drafts or not is_python(language_id=seen.language_id):
        return frozenset()
    check = Check(seen.document, seen.language_id)
    module: tuple[frozenset[str], frozenset[str]] | None = None  # read once, for an import
    out = set()
    for i, d in enumerate(drafts):
        if i and d.score < FLOOR:
            continue
        line = seen.typed + d.text if "\n" not in d.text.strip() else ""  # one line
        if module is None and imported_names(line.strip()):
            before, after = seen.document.before, seen.document.after
            cut = after.find("\n")
            lines = before[: before.rfind("\n") + 1].split("\n")
            lines += after[cut + 1 :].split("\n") if cut >= 0 else []
            module = imports_and_uses(lines, top=True)
        idle = module is not None and adds_nothing(line, *module, asked=not automatic)
        if idle or check.reads_unbound(d.text):
            out.add(d.text)
    return frozenset(out)


def _finish(raw: str, seen: Seen, indent: Indent | None, one_line: bool) -> str | None:
    """One candidate through finish/: the text steps on the context, the syntax check on the
    document."""
    return finish(
        raw,
        seen.prefix,
        seen.suffix,
        seen.language_id,
        document=seen.document,
        one_line=one_line,
        indent=indent,
    )
