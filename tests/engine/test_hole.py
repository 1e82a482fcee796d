"""The one hole (infill_engine/hole.py) and `prepare`: every front parses into the same type the
language server builds, and a prepared hole's context is cut once, to budgets that leave room
for the furthest any of its rows may reach, so the engine trims nothing of it and the window a
fill is finished against is the one the model saw. The real builtin model and tokenizer."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import infill_engine
from infill_engine import Engine, InfillParams, load
from infill_engine.hole import Hole, prepare
from infill_engine.request import fit_context, trim_context
from infill_engine.service.compat import parse_llama, parse_openai
from infill_engine.service.native import parse_native
from infill_engine.service.refine import parse_refine

ROOT = Path(infill_engine.__file__).resolve().parents[1]
BODY = "".join(f"    total_{i} = compute(values[{i}], scale={i}) + offset_{i}\n" for i in range(60))
DOC = f"def run(values):\n{BODY}    result = \n{BODY}    return result\n"
CURSOR = DOC.index("result = ") + len("result = ")
# one long line: the context fills its budgets to the token, no line end to leave slack
LINE = "total = " + " + ".join(f"values[{i}] * scale_{i}" for i in range(400)) + "\n"
HOLE_FIELDS = {"text", "offset", "language_id", "candidates", "prefix_tokens"}


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()


def test_every_front_parses_into_the_one_hole_the_language_server_builds() -> None:
    from lsp_server.engines import engine_client

    assert engine_client.Hole is Hole
    native = parse_native({"text": "x = ", "offset": 4, "languageId": "python"})
    llama = parse_llama({"input_prefix": "x = ", "input_suffix": "\n"}).ask
    openai = parse_openai({"prompt": "x = ", "suffix": "\n"}).ask
    refine = parse_refine({"prefix": "x = ", "text": "1", "suffix": "\n"}).hole
    assert all(type(h) is Hole for h in (native, llama, openai, refine))
    assert (refine.offset, refine.end, refine.priority) == (4, 5, "command")
    with pytest.raises(ValueError, match="offset 5 is outside the text"):
        Hole("x = ", 5)


def test_no_other_runtime_module_declares_a_hole() -> None:
    """NativeAsk (service) and engine_client.Hole (language server) were the same fields."""
    own = []
    for path in sorted(
        [*(ROOT / "infill_engine").rglob("*.py"), *(ROOT / "lsp_server").rglob("*.py")]
    ):
        if "lab" in path.parts:
            continue  # lab/holes.Hole is an evaluation case (its truth), not a request
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                fields = {
                    s.target.id
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
                if fields >= HOLE_FIELDS:
                    own.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert own == ["infill_engine/hole.py: Hole"]


@pytest.mark.parametrize(("doc", "cursor"), [(DOC, CURSOR), (LINE, len(LINE) // 2)])
def test_a_prepared_hole_is_cut_once_for_its_furthest_row(
    engine: Engine, doc: str, cursor: int
) -> None:
    """Three candidates (the planned span, twice and half of it) of a hole whose document is
    longer than the model's 384 positions: every row's context fits beside its span and the
    growth room its plan gives it, the row holds exactly the context's ids, and those ids are
    the window of the document the answer names (before, the budgets were sized for the planned
    span alone: the engine cut the 2x row's prefix again, mid-line, and growth the suffix's
    end)."""
    positions = engine.args.max_positions
    p = prepare(engine, Hole(doc, cursor, language_id="python", priority="invoked", candidates=3))
    ctx, plan = p.context, p.plan
    spans = [r.span for r in p.requests]
    assert len(set(spans)) == 3 and max(spans) > plan.span
    assert ctx.prefix_start > 0 and ctx.suffix_end < len(doc)  # the budgets did cut
    assert len(ctx.prefix_ids) <= plan.prefix_tokens and len(ctx.suffix_ids) <= plan.suffix_tokens
    assert (
        ctx.prefix == doc[ctx.prefix_start : cursor] and ctx.suffix == doc[cursor : ctx.suffix_end]
    )
    assert engine.decode_ids(ctx.prefix_ids) == ctx.prefix
    assert engine.decode_ids(ctx.suffix_ids) == ctx.suffix
    for r in p.requests:
        reach = max(r.span, r.max_span)
        assert len(r.prefix_ids) + reach + len(r.suffix_ids) <= positions, (r.span, reach)
        row = engine.rows.row(r)  # what the model sees: no id of the context left out
        assert row.canvas[: row.span_start].tolist() == list(ctx.prefix_ids)
        assert row.canvas[row.span_end :].tolist() == list(ctx.suffix_ids)
    for r, result in zip(p.requests, engine.infill_batch(p.requests), strict=True):
        # grown or not, the row kept its whole suffix: the far end never gave way
        assert len(r.prefix_ids) + result.span + len(r.suffix_ids) <= positions


def test_the_engine_checks_a_prepared_context_and_trims_only_a_text_callers(
    engine: Engine,
) -> None:
    positions = engine.args.max_positions
    with pytest.raises(ValueError, match="does not fit the 376 positions beside the span"):
        fit_context(list(range(300)), list(range(100)), positions - 8)
    with pytest.raises(ValueError, match="does not fit"):  # ids that skipped the budgets
        engine.requests("", "", [InfillParams(span=8)], ids=(tuple(range(1, 400)), ()))
    prefix, suffix = trim_context(list(range(900)), list(range(1000, 1300)), 400)
    assert len(prefix) + len(suffix) == 400
    assert prefix[-1] == 899 and suffix[0] == 1000  # the text next to the hole is kept
    # Engine.infill(prefix, suffix) takes text of any length: trimmed once, as it is encoded
    before, after = DOC[:CURSOR], DOC[CURSOR:]
    r = engine.request(before, after, InfillParams(span=8))
    assert len(r.prefix_ids) + len(r.suffix_ids) == positions - 8
    assert list(r.prefix_ids) == engine.encode(before)[-len(r.prefix_ids) :]
    assert list(r.suffix_ids) == engine.encode(after)[: len(r.suffix_ids)]
    assert engine.infill(before, after, InfillParams(span=8)).span == 8
