"""The rules an inline completion follows around the cursor, in-process: the real engine plans
and fills each hole, and the model's text is then set to a known one (the random test model
writes noise) so that each rule has something to act on.

1. No automatic completion inside a comment or string (an invoked one still runs).
2. Every item in the document's indentation: the editor's formatting options when sent, else
   what the document uses.
3. No item repeats the text after the cursor or closes a bracket the suffix already closes.
4. An automatic completion stays on one line except at an empty block or body.
5. Languages outside `completion.languages` (every language by default) get nothing, and the
   model's fills are shown only in the languages it knows; a snooze stops automatic ones.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

import grammars
from infill_engine.finish.postprocess import Indent, postprocess
from lsp_server.completion.inline import Ask, Completer
from lsp_server.engines.backend import Backend
from lsp_server.options import Options

# The model's fills are shown on automatic triggers too (drafts.trustModel): these rules act on
# its text, which the builtin model's default (not trusted unasked) would hide.
OPTS = replace(
    Options(),
    completion=replace(Options().completion, debounce_ms=0, candidates=1),
    drafts=replace(Options().drafts, trust_model=True),
)


class _Written:
    """The real backend, with the model's text replaced by `text` in every result; counts the
    holes that reached the engine and keeps the last plan's kind."""

    def __init__(self, engine: Any, text: str) -> None:
        self.real = Backend(lambda _: None, engine=engine)
        self.text, self.calls, self.kind = text, 0, ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    async def fill(self, hole: Any) -> Any:
        self.calls += 1
        filled = await self.real.fill(hole)
        self.kind = filled.kind
        return replace(filled, results=[replace(r, text=self.text) for r in filled.results])


def complete(
    engine: Any,
    marked: str,
    written: str,
    invoked: bool,
    language: str = "python",
    opts: Options = OPTS,
    completer: Completer | None = None,
    indent: Indent | None = None,
) -> tuple[list[str], _Written]:
    offset = marked.index("|")
    text = marked.replace("|", "", 1)
    parser = grammars.parser(language)
    tree = parser.parse(text.encode()) if parser is not None else None
    backend = _Written(engine, written)
    c = completer or Completer(backend, lambda _: None)  # type: ignore[arg-type]
    c.backend = backend  # type: ignore[assignment]
    ask = Ask("file:///r.py", text, offset, language, invoked, tree, indent)
    try:
        return asyncio.run(c.complete(ask, opts)), backend
    finally:
        backend.real.close()


# -- 1. comments and strings -----------------------------------------------------------------


@pytest.mark.parametrize(
    "marked",
    [
        "def f(x):\n    y = x  # the |\n    return y\n",
        'def f(x):\n    s = "the |"\n    return s\n',
        'def f(x):\n    """Doc |"""\n    return x\n',
    ],
)
def test_no_automatic_completion_in_a_comment_or_string(dream_engine: Any, marked: str) -> None:
    texts, backend = complete(dream_engine, marked, "word", invoked=False)
    assert texts == [] and backend.calls == 0  # never reached the engine
    texts, backend = complete(dream_engine, marked, "word", invoked=True)
    assert backend.calls == 1 and texts == ["word"]  # asked for: it runs


# -- 2. indentation --------------------------------------------------------------------------


def test_a_multi_line_item_takes_the_document_indentation(dream_engine: Any) -> None:
    doc = "def f(xs):\n\tfor x in xs:\n\t\t|\n"
    written = "if x:\n            print(x)"  # three levels of the model's 4 spaces
    texts, _ = complete(dream_engine, doc, written, invoked=True)
    assert texts == ["if x:\n\t\t\tprint(x)"]


def test_the_editor_formatting_options_win(dream_engine: Any) -> None:
    """The model's 4-space levels become the editor's 2-space ones. (In a document indented
    otherwise than the editor says, the result would not compile, and the finish drops it.)"""
    doc = "def f(xs):\n  for x in xs:\n    |\n"
    written = "if x:\n            print(x)"  # three levels of the model's 4 spaces
    texts, _ = complete(dream_engine, doc, written, invoked=True, indent=Indent(" ", 2))
    assert texts == ["if x:\n      print(x)"]
    clash = "def f(xs):\n    for x in xs:\n        |\n"
    texts, _ = complete(dream_engine, clash, written, invoked=True, indent=Indent(" ", 2))
    assert texts == []


def test_postprocess_uses_the_given_unit_over_the_detected_one() -> None:
    prefix, suffix = "def f():\n    if a:\n        ", "\n"
    assert postprocess("b()\n    c()", prefix, suffix) == "b()\n    c()"
    tabs = postprocess("b()\n        c()", prefix, suffix, indent=Indent("\t", 1))
    assert tabs == "b()\n\t\tc()"


# -- 3. the text after the cursor --------------------------------------------------------------


def test_a_closing_bracket_the_suffix_closes_is_dropped(dream_engine: Any) -> None:
    doc = "def f(a, b):\n    return max(\n        a,\n        |\n    )\n"
    texts, _ = complete(dream_engine, doc, "b)", invoked=True)
    assert texts == ["b"]


def test_an_item_that_only_repeats_the_suffix_is_dropped(dream_engine: Any) -> None:
    doc = "def f(a, b):\n    return max(|a, b)\n"
    texts, _ = complete(dream_engine, doc, "a, b)", invoked=True)
    assert texts == []


def test_postprocess_closers_across_lines() -> None:
    # `)` closes the `max(` above; the suffix's next line closes it already
    got = postprocess("a,\n        b)", "x = max(\n        ", "\n)\n")
    assert got == "a,\n        b"
    # a bracket the completion opened itself is its own to close
    assert postprocess("g(a)", "x = max(", ")\n") == "g(a)"
    assert postprocess("b]", "x = [a, ", "]\n") == "b"
    # the suffix closes something else: kept
    assert postprocess("b)", "x = f(a, ", "\n]\n") == "b)"


# -- 4. one line, except at an empty body ----------------------------------------------------


def test_an_automatic_completion_stays_on_one_line(dream_engine: Any) -> None:
    doc = "def f(xs):\n    total = |\n    return total\n"
    written = "sum(xs)\n    total += 1"
    texts, backend = complete(dream_engine, doc, written, invoked=False)
    assert backend.kind not in ("block_body", "function_body", "empty_body")
    assert texts == ["sum(xs)"]
    texts, _ = complete(dream_engine, doc, written, invoked=True)
    assert texts == [written]


def test_at_an_empty_body_an_automatic_completion_may_run_on(dream_engine: Any) -> None:
    doc = "def f(xs):\n    |\n\n\nprint(f([1]))\n"
    written = "total = sum(xs)\n    return total"
    texts, backend = complete(dream_engine, doc, written, invoked=False)
    assert backend.kind == "function_body"
    assert texts == [written]


# -- 5. languages and snooze -----------------------------------------------------------------


def test_a_language_outside_the_list_gets_nothing(dream_engine: Any) -> None:
    doc = "function f(a) {\n  return |\n}\n"
    python = replace(OPTS, completion=replace(OPTS.completion, languages=("python",)))
    for invoked in (False, True):
        texts, backend = complete(dream_engine, doc, "a;", invoked, "javascript", opts=python)
        assert texts == [] and backend.calls == 0
    js = replace(python, completion=replace(python.completion, languages=("python", "javascript")))
    knows = replace(js, engine=replace(js.engine, languages=("javascript",)))
    texts, backend = complete(dream_engine, doc, "a;", True, "javascript", opts=knows)
    assert backend.calls == 1 and texts == ["a;"]


def test_every_language_by_default_the_models_fills_only_in_its_own(dream_engine: Any) -> None:
    """The default list is every language; the builtin model's card says Python, so in Go
    no model pass runs (nothing it wrote could be shown) while the drafts still serve; the
    `modelLanguages` setting widens it."""
    assert Options().completion.languages == ("*",)
    doc = "func f(a int) int {\n\tif a > 0 {\n\t\treturn a\n\t}\n\t|\n}\n"
    texts, backend = complete(dream_engine, doc, "return 0", True, "go")
    assert backend.calls == 0
    assert texts == ["return a"]  # a draft: the line the document already has
    go = replace(OPTS, engine=replace(OPTS.engine, languages=("go",)))
    texts, backend = complete(dream_engine, doc, "return 0", True, "go", opts=go)
    assert backend.calls == 1 and texts  # the model ran; the draft still goes first
    python = "def f(a):\n    |\n"
    texts, backend = complete(dream_engine, python, "return a", True)
    assert backend.calls == 1 and texts[0] == "return a"


def test_a_language_with_no_grammar_gets_drafts(dream_engine: Any) -> None:
    """Plain text and a language with no grammar: drafts with the generic finish (no syntax
    check to run, the repetition cut still does), and no model pass (the builtin model knows
    Python alone)."""
    doc = "Deploy steps\n- run make release on the build host\n\nRollback\n|\n"
    for language in ("plaintext", "ruby"):
        texts, backend = complete(dream_engine, doc, "wo.g.g.g", True, language)
        assert backend.calls == 0
        assert texts and set(texts) <= {"Deploy steps", "- run make release on the build host"}


def test_a_snooze_stops_automatic_completions_only(dream_engine: Any) -> None:
    doc = "def f(xs):\n    total = |\n"
    completer = Completer(None, lambda _: None)  # type: ignore[arg-type]
    completer.snooze.set(5)
    texts, backend = complete(dream_engine, doc, "0", False, completer=completer)
    assert texts == [] and backend.calls == 0
    texts, backend = complete(dream_engine, doc, "0", True, completer=completer)
    assert texts == ["0"]
    completer.snooze.set(0)
    completer.typeahead.clear()
    texts, backend = complete(dream_engine, doc, "1", False, completer=completer)
    assert texts == ["1"] and backend.calls == 1
