"""The model tier of next edits (infill_engine/edits/rewrite.py, region.py): the region around the
cursor rewritten by the diffusion engine on random weights of every family and on the builtin
model, its exact mode token for token plain decoding of the same prompt, the candidates' scores
read in one batched pass, and the language server's backend calls (in process; "not available"
for an engine elsewhere)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import biased, make_dream, make_llada
from test_coda import make_coda
from test_dreamon import write_dreamon_tokenizer
from test_llada2 import make_llada2
from test_llada_moe import make_llada_moe

from infill_engine import InfillParams, load
from infill_engine.edits import Edit, History, Suggestion
from infill_engine.edits.region import history_block, region
from infill_engine.edits.rewrite import replacement, rewrite, verify
from infill_engine.engine import Engine
from lsp_server.engines.backend import Backend, NotReady, Superseded, Unavailable
from lsp_server.engines.hosted_fim import FimEngineClient
from lsp_server.options import EngineOptions

BEFORE = "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n"


def edited() -> tuple[str, list[Edit]]:
    """BEFORE with its first parameter renamed, as one didChange: the text and its history."""
    history = History()
    at = BEFORE.index("w,")
    history.record(BEFORE, at, at + 1, "width")
    return BEFORE[:at] + "width" + BEFORE[at + 1 :], history.edits()


TEXT, EDITS = edited()
CURSORS = [TEXT.index("return w"), TEXT.index("(w + h)"), len(TEXT)]


def make_qwen2_diffusion(path: Path) -> None:
    make_dream(path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "model_type": "qwen2"}))


def make_dreamon(path: Path) -> None:
    make_dream(path)
    write_dreamon_tokenizer(path)  # <|expand|>, and the end token deletes


FAMILIES: dict[str, Callable[[Path], Any]] = {
    "dream": make_dream,
    "dreamon": make_dreamon,
    "llada": make_llada,
    "qwen2-diffusion": make_qwen2_diffusion,
    "coda": lambda p: make_coda(p, stored_head=True),
    "llada-moe": make_llada_moe,
    "llada2": make_llada2,
}


@pytest.fixture(scope="module", params=[*sorted(FAMILIES), "builtin"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    name = request.param
    if name == "builtin":
        e = load("builtin", device="cpu")
    else:
        path = tmp_path_factory.mktemp(name)
        FAMILIES[name](path)
        e = load(str(path), device="cpu", qwen2_as_diffusion=name == "qwen2-diffusion")
    yield e
    e.close()


def well_formed(e: Engine, cursor: int, mode: Any) -> None:
    rw = rewrite(e, TEXT, cursor, EDITS, "python", speculate=mode)
    p = rw.prompt
    assert p.old == TEXT[p.start : p.end] and p.start <= cursor <= p.end
    assert p.prefix.startswith("# recent edits") and "# + def area(width, h):" in p.prefix
    assert TEXT[: p.start].endswith(p.prefix.split("\n", 7)[-1])  # the text just before it
    assert TEXT[p.end :].startswith(p.suffix)
    assert rw.request.drafts == (tuple(e.encode(p.old)),)  # the old text is the draft
    assert rw.request.params.expand == (e.expand_id is not None and mode in (None, "off"))
    assert rw.result.stop_reason in ("end_token", "span_full")
    assert len(rw.result.token_ids) <= rw.result.span <= rw.request.max_span
    s = rw.suggestion
    if rw.new == p.old or (not rw.new.strip() and p.old.strip()):  # no change, or declined
        assert s is None
    else:
        assert s is not None and s.kind == "model" and 0 <= s.score <= 1
        assert p.start <= s.start <= s.end <= p.end
        assert s.applied(TEXT) == TEXT[: p.start] + rw.new + TEXT[p.end :]


def test_the_rewrite_runs_on_every_family(engine: Engine) -> None:
    for cursor, mode in zip(CURSORS, (None, "fast", "off"), strict=True):
        well_formed(engine, cursor, mode)


def test_the_exact_mode_is_plain_decoding_of_the_same_region(engine: Engine) -> None:
    verified, passes = 0, []
    for cursor in CURSORS[:2]:
        rw = rewrite(engine, TEXT, cursor, EDITS, "python", speculate="exact")
        plain_params = replace(rw.request.params, speculate="off")
        plain = engine.infill(rw.prompt.prefix, rw.prompt.suffix, plain_params)
        assert rw.result.token_ids == plain.token_ids
        assert (rw.result.text, rw.result.stop_reason) == (plain.text, plain.stop_reason)
        assert rw.result.nfe + rw.result.verified == plain.nfe  # steps without a pass of their own
        verified += rw.result.verified
        passes.append(plain.nfe)
    # the guesses were taken: fewer passes than plain decoding (a fill of a pass or two, as the
    # builtin model's here, leaves nothing to guess)
    assert verified > 0 or max(passes) <= 2


def test_verify_scores_every_candidate_in_one_pass(engine: Engine) -> None:
    at = TEXT.index("w * h")
    candidates = [
        Suggestion(at, at + 1, "width", "rename", 0.5),  # the rename's next reference
        Suggestion(at, at + 1, "height", "rename", 0.5),
        Suggestion(TEXT.index("\n\n\n"), TEXT.index("\n\n\n") + 2, "", "twin", 0.5),  # a deletion
        Suggestion(len(TEXT), len(TEXT), "print(area(2, 3))\n", "shape", 0.5),  # at the end
        Suggestion(0, 3, "async def", "signature", 0.5, uri="file:///other.py"),
    ]
    passes = []
    hook = engine.model.register_forward_hook(lambda *_: passes.append(1))
    try:
        scores = verify(engine, TEXT, candidates, EDITS, "python")
    finally:
        hook.remove()
    assert len(passes) == 1
    assert len(scores) == len(candidates)
    assert all(0 < s <= 1 for s in scores[:4]) and scores[4] == 0.0  # another document's
    # alone, as in the batch: no padding leaks into it (float32 sums in another order differ in
    # the sixth digit on some CPUs; a leak moves the score by orders more)
    alone = verify(engine, TEXT, candidates[:1], EDITS, "python")[0]
    assert alone == pytest.approx(scores[0], rel=1e-4)
    with pytest.raises(ValueError, match="outside the text"):
        verify(engine, TEXT, [Suggestion(0, len(TEXT) + 1, "x", "model", 0.5)])


def test_the_builtin_models_rewrite_is_a_suggestion_at_valid_offsets() -> None:
    """A parameter renamed: the regions around its other references, rewritten in each mode,
    give suggestions, each within its region of the document (the builtin model is too small
    to write the right one: it is not trusted, and its rewrites are never shown)."""
    e = load("builtin", device="cpu")
    text = TEXT + "\n\ndef diagonal(w, h):\n    return (w * w + h * h) ** 0.5\n"
    found = []
    try:
        for cursor in (text.index("return 2"), text.index("return w"), text.index("return (")):
            for mode in ("fast", "off", None):
                rw = rewrite(e, text, cursor, EDITS, "python", speculate=mode)
                if (s := rw.suggestion) is not None:
                    assert s.kind == "model" and 0 <= s.score <= 1 and s.applies_to(text)
                    assert rw.prompt.start <= s.start <= s.end <= rw.prompt.end <= len(text)
                    found.append(s)
    finally:
        e.close()
    assert found


def test_region_is_whole_lines_around_the_cursor_and_bounded() -> None:
    text = "".join(f"line {i}\n" for i in range(20))
    cursor = text.index("line 10") + 3
    start, end = region(text, cursor)
    assert text[start:end] == "".join(f"line {i}\n" for i in range(8, 15))
    start, end = region(text, cursor, text.index("line 12"))  # around a span
    assert text[start:end] == "".join(f"line {i}\n" for i in range(8, 17))
    start, end = region(text, cursor, max_chars=len("line 10\n") * 3)
    assert text[start:end] == "line 9\nline 10\nline 11\n"  # below goes first, then above
    assert region(text, cursor, max_chars=1) == (text.index("line 10"), text.index("line 11"))
    assert region("", 0) == (0, 0)
    assert region("x = 1", 5) == (0, 5)
    with pytest.raises(ValueError, match="outside the text"):
        region(text, len(text) + 1)


def test_the_edits_are_comment_lines_of_the_language() -> None:
    block = history_block(EDITS, "python")
    assert block == ("# recent edits, oldest first\n# - def area(w, h):\n# + def area(width, h):\n")
    assert history_block(EDITS, "javascript").startswith("// recent edits")
    assert history_block([], "python") == ""


def test_the_replacement_is_the_smallest() -> None:
    assert replacement("return w * h\n", "return width * h\n") == (8, 8, "idth")
    assert replacement("a\nb\n", "a\n") == (2, 4, "")
    assert replacement("same", "same") is None


def test_the_backend_rewrites_and_verifies_in_process(dream_engine: Engine) -> None:
    backend = Backend(lambda _: None, engine=dream_engine)
    assert backend.rewrites

    async def ask() -> tuple[Suggestion | None, list[float]]:
        found = await backend.rewrite(TEXT, CURSORS[0], EDITS, "python")
        at = TEXT.index("w * h")
        scores = await backend.verify(
            TEXT, [Suggestion(at, at + 1, "width", "rename", 0.5)], EDITS, "python"
        )
        return found, scores

    found, scores = asyncio.run(ask())
    assert found is None or (found.kind == "model" and found.applies_to(TEXT))
    assert len(scores) == 1 and 0 < scores[0] <= 1
    assert backend.counters.model_calls == 1 and backend.counters.last["kind"] == "rewrite"
    stopped = threading.Event()
    stopped.set()  # a newer request on the document came first: no model call at all
    with pytest.raises(Superseded):
        asyncio.run(backend.rewrite(TEXT, 0, EDITS, "python", cancel=stopped))
    with pytest.raises(ValueError, match="outside the text"):
        asyncio.run(backend.rewrite(TEXT, len(TEXT) + 1, EDITS, "python"))


def test_an_engine_elsewhere_says_it_cannot_rewrite() -> None:
    backend = Backend(lambda _: None)
    assert not backend.rewrites
    with pytest.raises(NotReady):  # nothing loaded yet
        asyncio.run(backend.rewrite(TEXT, 0, EDITS, "python"))
    options = EngineOptions(address="openai+http://127.0.0.1:9/v1")
    backend._use(FimEngineClient(backend._open_port(), options, backend.backoff_s))
    backend._write("ready", None)
    assert not backend.rewrites
    with pytest.raises(Unavailable, match="in process"):
        asyncio.run(backend.rewrite(TEXT, 0, EDITS, "python"))
    with pytest.raises(Unavailable, match="in process"):
        asyncio.run(backend.verify(TEXT, []))


def test_a_cancelled_rewrite_stops_its_row(dream_engine: Engine) -> None:
    """The handler's task cancelled (a newer request, the deadline): the row's flag is set, so
    it leaves the batch at its next step."""
    backend = Backend(lambda _: None, engine=dream_engine)
    flag = threading.Event()

    async def cancel_it() -> None:
        task = asyncio.ensure_future(
            backend.rewrite(TEXT, CURSORS[0], EDITS, "python", cancel=flag)
        )
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_it())
    assert flag.is_set()


def test_the_fast_mode_commits_the_old_text_where_the_model_agrees(dream_engine: Engine) -> None:
    """A model made to want one token everywhere, and a region of that token: the old text (the
    draft) is predicted back and committed in one step, where plain decoding takes a token a
    step (the fixed schedule)."""
    e = dream_engine
    q = e.encode("q")[0]
    text = "q" * 40
    assert e.encode(text) == [q] * 40
    old = biased(e, q, 50.0)
    try:
        one = InfillParams(decode="fixed")
        fast = rewrite(e, text, 10, (), "python", params=one, speculate="fast")
        plain = rewrite(e, text, 10, (), "python", params=one, speculate="off")
    finally:
        e.model.lm_head = old
    assert fast.result.drafted == 40 and plain.result.nfe == 50
    assert fast.result.nfe < 20
    assert fast.new.startswith(text)
