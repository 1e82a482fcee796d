"""In-process unit tests of the server's domain modules: options, context budgets, syntax."""

from __future__ import annotations

import contextlib
import re
from typing import Any

import pytest

from infill_engine.context import Tokens, build_context
from infill_engine.finish import syntax
from lsp_server.commands.editing import function_bodies
from lsp_server.options import Options, decode_params, describe, parse_options


def words(s: str) -> int:
    return len(s.split())


def word_spans(s: str) -> Tokens:
    spans = [m.span() for m in re.finditer(r"\S+", s)]
    return Tokens(list(range(len(spans))), spans)


def test_options_defaults_and_partial_updates() -> None:
    opts, errors = parse_options({"dllm": {"decode.threshold": 0.5, "languages": ["python", "go"]}})
    assert errors == []
    assert opts.decode.threshold == 0.5 and opts.completion.languages == ("python", "go")
    later, errors = parse_options({"decode": {"blockSize": 8}}, base=opts)
    assert errors == [] and later.decode.block_size == 8 and later.decode.threshold == 0.5
    assert describe(Options())["decode.maxSpan"] == 128
    # null hands τ back to the model's recommendation
    assert describe(Options())["decode.threshold"] is None
    back, errors = parse_options({"decode": {"threshold": None}}, base=opts)
    assert errors == [] and back.decode.threshold is None


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"decode": {"threshold": "high"}}, "decode.threshold"),
        ({"decode": {"span": 0}}, "decode.span"),
        ({"decode": {"cache": "paged"}}, "decode.cache"),
        ({"decode": {"speculate": "always"}}, "decode.speculate"),
        ({"decode": {"lookahead": 17}}, "decode.lookahead"),
        ({"languages": "python"}, "languages"),
        ({"candidates": True}, "candidates"),
        ({"model": ""}, "model"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_options_reject_bad_values(raw: dict[str, object], key: str) -> None:
    opts, errors = parse_options(raw)
    assert len(errors) == 1 and key in errors[0]
    assert describe(opts) == describe(Options())


def test_options_reject_a_non_object() -> None:
    opts, errors = parse_options(["not", "a", "dict"])
    assert opts == Options() and "must be an object" in errors[0]


def test_context_respects_budgets_and_line_boundaries() -> None:
    text = "".join(f"line {i} has some words\n" for i in range(100))
    cursor = text.index("line 50")
    ctx = build_context(text, cursor, word_spans, prefix_tokens=20, suffix_tokens=10)
    assert words(ctx.prefix) <= 20 and words(ctx.suffix) <= 10
    assert ctx.prefix.startswith("line ") and ctx.prefix.endswith("\n")  # whole lines
    assert ctx.suffix.endswith("\n")
    assert text[ctx.prefix_start : cursor] == ctx.prefix
    assert text[cursor : ctx.suffix_end] == ctx.suffix
    # As many whole lines as fit: one more would be over budget.
    assert words(text[: ctx.prefix_start].splitlines(keepends=True)[-1] + ctx.prefix) > 20


def test_context_cuts_a_huge_line_by_characters() -> None:
    text = "x = [" + ", ".join(str(i) for i in range(500)) + "]"
    ctx = build_context(text, len(text) - 1, word_spans, prefix_tokens=7, suffix_tokens=0)
    assert 0 < words(ctx.prefix) <= 7 and ctx.suffix == ""
    assert text.endswith(ctx.prefix + "]")


def test_a_tail_of_untokenized_whitespace_is_kept_as_text_with_no_ids() -> None:
    # a tokenizer that leaves whitespace out, the cursor on an indented blank line past budget
    text = "aaa bbb ccc\n    "
    ctx = build_context(text, len(text), word_spans, prefix_tokens=2, suffix_tokens=0)
    assert (ctx.prefix, ctx.prefix_ids) == ("    ", ())
    text = "aaa bbb ccc\n    ddd"
    ctx = build_context(text, len(text), word_spans, prefix_tokens=2, suffix_tokens=0)
    assert ctx.prefix == "    ddd" and len(ctx.prefix_ids) == 1


def test_zero_budget_and_empty_document() -> None:
    assert build_context("", 0, word_spans, 10, 10).prefix == ""
    ctx = build_context("a b c\n", 3, word_spans, 0, 0)
    assert ctx.prefix == ctx.suffix == ""


SRC = (
    "class A:\n"
    "    def m(self, x):\n"
    '        """Doc."""\n'
    "        y = x + 1\n"
    "        return y\n\n"
    "def only_doc():\n"
    '    """Only a docstring."""\n\n'
    "def one(): return 1\n"
)


def test_function_body_after_docstring() -> None:
    hole = function_bodies.function_body(SRC, SRC.index("y = x"), "python")
    assert hole is not None and hole.name == "m" and hole.indent == "        "
    assert SRC[hole.start : hole.end] == "        y = x + 1\n        return y"


def test_function_body_of_docstring_only_and_one_liner() -> None:
    hole = function_bodies.function_body(SRC, SRC.index("Only"), "python")
    assert hole is not None and hole.start == hole.end
    assert SRC[hole.start :].startswith("\ndef one")
    one = function_bodies.function_body(SRC, SRC.index("return 1"), "python")
    assert one is not None and SRC[one.start : one.end] == "return 1"


def test_no_function_and_unknown_language() -> None:
    assert function_bodies.function_body("x = 1\n", 2, "python") is None
    assert function_bodies.function_body(SRC, 5, "cobol") is None
    assert syntax.parses("def f(:\n", "python") is False
    assert syntax.parses("x = 1\n", "python") is True
    assert syntax.error_count("x = 1\n", "cobol") is None
    assert syntax.error_count("def f(:\n  return (\n", "python") >= 1  # type: ignore[operator]


def test_syntax_fit_refuses_a_fill_that_breaks_the_document() -> None:
    prefix = "def f(xs):\n    for x in xs:\n        "
    suffix = "\n    return xs\n"
    assert syntax.error_count(prefix + suffix, "python") == 0
    assert syntax.fit(prefix, "print(x)", suffix, "python") == "print(x)"
    assert syntax.fit(prefix, "else:::::::::", suffix, "python") == ""  # every cut adds errors
    # a good first line is kept and the broken rest cut off
    assert syntax.fit(prefix, "print(x)\n        )]", suffix, "python") == "print(x)"
    # the longest clean cut on the first line: `print(x` alone would add a MISSING ")"
    assert syntax.fit(prefix, "print(x) + )", suffix, "python") == "print(x)"
    # a window that does not parse on its own: the fill may fix it, never make it worse
    assert syntax.fit("x = (1 +\n", "2)", "\ny = 2\n", "python") == "2)"
    # other languages are checked by their own grammar
    c_prefix, c_suffix = "int f(int x) {\n    ", "\n}\n"
    assert syntax.fit(c_prefix, "return x;", c_suffix, "c") == "return x;"
    assert syntax.fit(c_prefix, "return x; }}", c_suffix, "c") == "return x;"
    assert syntax.fit(c_prefix, "x = ;", c_suffix, "cobol") == "x = ;"  # no grammar: unchecked


def test_function_body_from_the_blank_body_line_below_it() -> None:
    doc = 'def greet(name):\n    """Return a greeting."""\n    \n\n\nprint(greet("w"))\n'
    cursor = doc.index('."""\n') + len('."""\n') + 4  # end of the indented blank line
    hole = function_bodies.function_body(doc, cursor, "python")
    assert hole is not None and hole.name == "greet" and hole.start == hole.end
    # a method: the blank line at method depth is the method's, at class depth it is not
    cls = "class A:\n    def m(self):\n        x = 1\n        \n    \n"
    inner = function_bodies.function_body(cls, cls.index("x = 1") + 14, "python")
    assert inner is not None and inner.name == "m"
    assert function_bodies.function_body(cls, len(cls) - 1, "python") is None
    # column 0 below a function is module level
    assert function_bodies.function_body("def f():\n    return 1\n\n", 23, "python") is None


class _Recording:
    """Backend stand-in that records the context that reached the model (as the engine's reply
    says it cut it), over a real engine."""

    def __init__(self, engine: Any) -> None:
        from lsp_server.engines.backend import Backend

        self.real = Backend(lambda _: None, engine=engine)
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    async def fill(self, hole: Any) -> Any:
        filled = await self.real.fill(hole)
        self.calls.append(filled.context(hole))
        return filled


def test_regenerate_puts_the_instruction_before_the_selection_as_a_comment(
    dream_engine: Any,
) -> None:
    import asyncio

    from lsp_server.commands.editing import CommandError, regenerate_selection

    text = "def scale(values, k):\n    out = []\n    for v in values:\n        out.append(v * k)\n"
    text += "    return out\n"
    start = text.index("out.append")
    end = text.index("\n", start)
    backend = _Recording(dream_engine)
    for instruction in ("use  a list\ncomprehension", None):
        try:
            call = regenerate_selection(
                backend,  # type: ignore[arg-type]
                text,
                start,
                end,
                instruction,
                Options(),
                "python",
            )
            edit = asyncio.run(call)
            assert (edit.start, edit.end) == (start, end)
        except CommandError:
            pass  # the random test model may write nothing; what reached it is the point
    (with_note, suffix), (plain, suffix2) = backend.calls
    head = "def scale(values, k):\n    out = []\n    for v in values:\n"
    assert with_note == head + "        # use a list comprehension\n        "
    assert plain == head + "        " and suffix == suffix2 == "\n    return out\n"
    assert "comprehension" not in text
    backend.real.close()


@pytest.mark.parametrize(("invoked", "candidates"), [(True, 1), (True, 3), (False, 1)])
def test_a_completion_is_queued_at_the_priority_of_how_it_was_asked_for(
    dream_engine: Any, invoked: bool, candidates: int
) -> None:
    """The queue's priority is what the trigger says, never guessed from the number of spans
    (an invoked request for one candidate was once queued as ghost text)."""
    import asyncio
    from dataclasses import replace

    from infill_engine.scheduler import PRIORITIES
    from lsp_server.completion.inline import Ask, Completer
    from lsp_server.engines.backend import Backend

    backend = Backend(lambda _: None, engine=dream_engine)
    joined: list[int] = []
    scheduler = dream_engine.scheduler()
    scheduler.on_join = lambda tickets: joined.extend(t.priority for t in tickets)
    opts = Options()
    opts = replace(opts, completion=replace(opts.completion, candidates=candidates, debounce_ms=0))
    # a trusted model: an untrusted one's fills are never shown unasked, and get no pass
    opts = replace(opts, drafts=replace(opts.drafts, trust_model=True))
    text = "def add(a, b):\n    return \n"
    ask = Ask("file:///p.py", text, text.index("return ") + 7, "python", invoked=invoked)
    try:
        asyncio.run(Completer(backend, lambda _: None).complete(ask, opts))
    finally:
        scheduler.on_join = None
    want = PRIORITIES["invoked" if invoked else "automatic"]
    assert joined and set(joined) == {want}
    assert len(joined) == (candidates if invoked else 1)


@pytest.mark.parametrize(
    ("language_id", "text", "line"),
    [
        ("javascript", "function f(a) {\n  let b = a + 1;\n  return b;\n}\n", "let b = a + 1;"),
        ("rust", "fn f(a: i32) -> i32 {\n    let b = a + 1;\n    b\n}\n", "let b = a + 1;"),
        ("go", "func f(a int) int {\n\tb := a + 1\n\treturn b\n}\n", "b := a + 1"),
        ("python", "def f(a):\n    b = a + 1\n    return b\n", "b = a + 1"),
    ],
)
def test_the_instruction_is_a_comment_in_the_language_of_the_document(
    dream_engine: Any, language_id: str, text: str, line: str
) -> None:
    import asyncio

    import grammars
    from lsp_server.commands.editing import CommandError, regenerate_selection

    start = text.index(line)
    backend = _Recording(dream_engine)
    opts, _ = parse_options({"completion": {"languages": [language_id]}})
    with contextlib.suppress(CommandError):  # what reached the model is the point
        call = regenerate_selection(
            backend,  # type: ignore[arg-type]
            text,
            start,
            start + len(line),
            "add two",
            opts,
            language_id,
        )
        asyncio.run(call)
    ((prefix, _),) = backend.calls
    spec = grammars.spec(language_id)
    assert spec is not None
    note_line = prefix.rsplit("\n", 2)[-2].strip()
    assert note_line == f"{spec.line_comment} add two"
    assert ("#" in prefix) == (language_id == "python")
    backend.real.close()


def test_one_inline_completion_tokenizes_its_text_once_and_trims_it_once(
    dream_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The context's ids are the request's ids: the engine encodes no part of prefix or
    suffix again, and the budgets that cut the context leave the engine nothing to trim."""
    import asyncio
    from dataclasses import replace

    from infill_engine.context import tokenize_with
    from lsp_server.completion.inline import Ask, Completer
    from lsp_server.engines.backend import Backend

    backend = Backend(lambda _: None, engine=dream_engine)
    tokenized: list[str] = []
    encoded: list[str] = []
    real_encode = dream_engine.encode

    def real_tokenize(s: str) -> Tokens:
        return tokenize_with(dream_engine.tokenizer, s)

    def tokenize(tokenizer: Any, s: str) -> Tokens:
        tokenized.append(s)
        return tokenize_with(tokenizer, s)

    # the in-process engine runs the service's own steps (hole.prepare)
    monkeypatch.setattr("infill_engine.hole.tokenize_with", tokenize)
    dream_engine.encode = lambda s: (encoded.append(s), real_encode(s))[1]
    joined: list[Any] = []
    scheduler = dream_engine.scheduler()
    scheduler.on_join = lambda tickets: joined.extend(t.request for t in tickets)
    body = "".join(f"    total_{i} = compute(values[{i}], scale={i})\n" for i in range(400))
    text = f"def run(values):\n{body}    result = \n    return result\n"
    offset = text.index("result = ") + len("result = ")
    opts = Options()
    opts = replace(opts, completion=replace(opts.completion, debounce_ms=0))
    opts = replace(opts, drafts=replace(opts.drafts, trust_model=True))  # so the model runs
    try:
        ask = Ask("file:///t.py", text, offset, "python", invoked=False)
        asyncio.run(Completer(backend, lambda _: None).complete(ask, opts))
    finally:
        scheduler.on_join = None
        del dream_engine.encode
    assert len(tokenized) == 2  # the prefix's window and the suffix's, once each
    before, after = tokenized
    assert text[:offset].endswith(before) and text[offset:].startswith(after)
    tail = text[offset - 40 : offset]
    # the planner encodes only its evidence, single lines near the cursor
    assert encoded and all("\n" not in s and tail not in s for s in encoded), encoded
    (request,) = joined
    assert request.prefix_ids == tuple(real_tokenize(before).ids)[-len(request.prefix_ids) :]
    assert 0 < len(request.prefix_ids) < len(real_tokenize(before).ids)  # the budget cut it
    # nothing left to trim, nor cut from the suffix's end as the span grows
    room = dream_engine.args.max_positions - max(request.span, request.max_span)
    assert len(request.prefix_ids) + len(request.suffix_ids) <= room


def test_the_speculation_settings_reach_the_engines_params() -> None:
    opts, errors = parse_options({"decode": {"speculate": "exact", "lookahead": 2}})
    assert errors == []
    params = decode_params(opts.decode)
    assert (params.speculate, params.lookahead) == ("exact", 2)
    assert decode_params(Options().decode).speculate == "off"
