"""A document's edit history as documents.py records it, the recently viewed excerpts, and the
next-edit step's sources: in process, on in-memory documents.

Keystrokes typed one at a time are one edit; a change sent as a whole line or the whole text
records only what changed; a document going out of sync forgets its edits, and so does one
brought back by a full text. The viewed ring is bounded, its excerpts too, and never returns the
document asked about. A source that fails or runs past nextEdits.maxLatencyMs is left out.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from infill_engine.edits.history import Edit
from infill_engine.edits.suggestion import Suggestion
from lsp_server.completion import next_edit
from lsp_server.completion.next_edit import EditAsk, NextEdits, structure
from lsp_server.options import Options, parse_options
from lsp_server.workspace.documents import MAX_DIFF_CHARS, Document, Documents
from lsp_server.workspace.viewed import MAX_CHARS, MAX_ENTRIES, MAX_LINES, Viewed, excerpt

URI = "file:///a.py"
TEXT = "def area(w, h):\n    return w * h\n"


def change(docs: Documents, version: int, *changes: dict[str, Any]) -> str:
    params = {"textDocument": {"uri": URI, "version": version}, "contentChanges": list(changes)}
    return docs.change(params, "utf-16")


def at(line: int, a: int, b: int, text: str) -> dict[str, Any]:
    return {
        "range": {"start": {"line": line, "character": a}, "end": {"line": line, "character": b}},
        "text": text,
    }


def opened(text: str = TEXT) -> tuple[Documents, Document]:
    docs = Documents()
    return docs, docs.open(URI, "python", 1, text)


def test_keystrokes_typed_one_at_a_time_are_one_edit() -> None:
    docs, doc = opened()
    for i, ch in enumerate("idth"):  # `w` becomes `width`, a key at a time
        assert change(docs, 2 + i, at(0, 10 + i, 10 + i, ch)) == "applied"
    assert doc.text.startswith("def area(width, h):")
    [edit] = doc.history.edits()
    assert (edit.start, edit.old, edit.new) == (10, "", "idth")
    assert edit.lines_before == "def area(w, h):" and edit.lines_after == "def area(width, h):"


def test_a_whole_line_or_the_whole_text_records_only_what_changed() -> None:
    by_key, doc_a = opened()
    change(by_key, 2, at(0, 9, 10, "width"))
    by_line, doc_b = opened()
    change(by_line, 2, at(0, 0, 15, "def area(width, h):"))
    whole, doc_c = opened()
    change(whole, 2, {"text": TEXT.replace("(w,", "(width,")})
    assert doc_a.text == doc_b.text == doc_c.text
    assert doc_a.history.edits() == doc_b.history.edits() == doc_c.history.edits()
    [edit] = doc_c.history.edits()
    assert (edit.start, edit.old, edit.new) == (10, "", "idth")
    # a change that changes nothing is no edit
    change(whole, 3, {"text": doc_c.text})
    assert len(doc_c.history) == 1


def test_out_of_sync_forgets_the_edits_and_a_full_text_brings_back_none() -> None:
    docs, doc = opened()
    change(docs, 2, at(0, 9, 10, "width"))
    assert len(doc.history) == 1
    assert change(docs, 3, {"range": "bad", "text": "x"}) == "out of sync"
    assert len(doc.history) == 0 and not doc.in_sync
    change(docs, 4, at(1, 11, 12, "width"))  # skipped while out of sync
    assert len(doc.history) == 0
    # the full text that brings it back is compared with text the editor no longer had
    assert change(docs, 5, {"text": TEXT.replace("w", "width")}) == "applied"
    assert doc.in_sync and len(doc.history) == 0
    change(docs, 6, at(1, 4, 4, "x"))
    assert len(doc.history) == 1  # and then records again


def test_a_huge_change_clears_the_history() -> None:
    docs, doc = opened()
    change(docs, 2, at(0, 9, 10, "width"))
    paste = "# " + "x" * MAX_DIFF_CHARS + "\n"
    change(docs, 3, at(1, 0, 0, paste))
    assert len(doc.history) == 0
    assert doc.text == "def area(width, h):\n" + paste + "    return w * h\n"
    change(docs, 4, at(0, 0, 0, "#"))
    assert len(doc.history) == 1  # the next edit is recorded as any other


def test_long_common_ends_are_trimmed_past_a_chunk() -> None:
    body = "".join(f"line {i} = {i}\n" for i in range(3000))  # past several 1024-char chunks
    docs, doc = opened(body)
    new = body.replace("line 1500 = 1500", "line 1500 = 15000")
    change(docs, 2, {"text": new})
    [edit] = doc.history.edits()
    assert (edit.old, edit.new) == ("", "0") and new[edit.start : edit.end] == "0"
    assert edit.lines_after == "line 1500 = 15000"


def test_a_whole_text_on_a_large_document_is_read_as_the_span_it_changed() -> None:
    """A client that sends the whole text on every keystroke: the tree reparses from the old
    one (not from scratch), and the history records the edit even where the document is larger
    than a change that is read (MAX_DIFF_CHARS), as it would a ranged change."""
    body = "".join(f"line_{i} = {i}\n" for i in range(MAX_DIFF_CHARS // 10))
    assert len(body) > MAX_DIFF_CHARS
    docs, doc = opened(body)
    assert doc.syntax_tree() is not None
    parses: list[bool] = []
    parser = doc.tree.parser

    class Watched:
        def parse(self, data: bytes, old: Any = None) -> Any:
            parses.append(old is not None)
            return parser.parse(data, old) if old is not None else parser.parse(data)

    doc.tree.parser = Watched()
    new = body.replace("line_9000 = 9000", "line_9000 = 90001")
    assert change(docs, 2, {"text": new}) == "applied"
    tree = doc.syntax_tree()
    assert parses == [True] and tree is not None and not tree.root_node.has_error
    [edit] = doc.history.edits()
    assert (edit.old, edit.new) == ("", "1") and edit.lines_after == "line_9000 = 90001"
    assert change(docs, 3, {"text": new}) == "applied" and doc.syntax_tree() is not None
    assert parses == [True] and len(doc.history) == 1  # the same text again changes nothing


def test_the_viewed_ring_is_bounded_and_leaves_out_the_document_asked_about() -> None:
    ring = Viewed()
    text = "".join(f"row {i}\n" for i in range(200))
    for i in range(MAX_ENTRIES + 3):
        ring.saw(f"file:///{i}.py", text, text.index("row 100"))
    assert len(ring) == MAX_ENTRIES
    recent = ring.recent(exclude=f"file:///{MAX_ENTRIES + 2}.py")
    assert [e.uri for e in recent][-2:] == [
        f"file:///{MAX_ENTRIES}.py",
        f"file:///{MAX_ENTRIES + 1}.py",
    ]  # newest last
    assert len(recent) == MAX_ENTRIES - 1
    first = recent[-1]
    assert first.text.splitlines()[0] == f"row {first.line}" and first.line == 100 - MAX_LINES // 2
    assert len(first.text.splitlines()) == MAX_LINES and "row 100" in first.text
    # seen again without a cursor (didFocus): the excerpt stays, now the newest
    ring.saw(f"file:///{MAX_ENTRIES}.py", "other text", None)
    assert (
        ring.recent()[-1].uri == f"file:///{MAX_ENTRIES}.py" and "row 100" in ring.recent()[-1].text
    )
    # one long line: the characters nearest the cursor
    body, line = excerpt("a" * 5000 + "X" + "b" * 5000, 5000)
    assert len(body) == MAX_CHARS and "X" in body and line == 0
    # opening a document records it
    docs, _ = opened()
    assert [e.uri for e in docs.viewed.recent()] == [URI]


async def _late(ask: EditAsk, options: Options) -> list[Suggestion]:
    await asyncio.sleep(5)
    return [Suggestion(0, 0, "never", "hosted", 1.0)]


async def _broken(ask: EditAsk, options: Options) -> list[Suggestion]:
    raise RuntimeError("a source's own failure")


async def test_a_late_or_failing_source_leaves_the_others_answer() -> None:
    docs, doc = opened()
    change(docs, 2, at(0, 9, 10, "width"))
    options, errors = parse_options({"nextEdits": {"maxLatencyMs": 300}})
    assert not errors
    step = NextEdits([structure, _late, _broken])
    loop = asyncio.get_running_loop()
    started = loop.time()
    found = await step.suggest(doc, 14, options)
    assert loop.time() - started < 1.0  # the late source was not waited for
    assert found is not None and (found.kind, found.text) == ("rename", "width")
    assert doc.text[found.start : found.end] == "w" and found.start > doc.text.index("return")
    # nothing edited yet: no source is asked
    assert await NextEdits([_broken]).suggest(opened()[1], 0, options) is None
    # a gate over every score shows none
    strict, _ = parse_options({"nextEdits": {"gate": 1.0}})
    assert await step.suggest(doc, 14, strict) is None
    assert isinstance(doc.history.edits()[0], Edit)


async def test_the_structure_source_runs_off_the_event_loop_and_holds_its_deadline(
    monkeypatch: Any,
) -> None:
    """In a file of 7,500 lines, a local renamed where each function has one takes tens of
    milliseconds to read (the same replacement elsewhere). That work runs in a thread: the
    deadline ends the wait (a source run on the event loop could not be cut, and its answer
    came however late), and the loop turns while it runs: the work waits, from inside, for a
    callback that only a turning loop runs (on the loop it would wait in vain), so the check
    holds however fast the machine reads the file."""
    text = "".join(
        f"def f{i}(w, h):\n    area = w * h + {i}\n    return area\n\n\n" for i in range(1500)
    )
    docs, doc = opened(text)
    doc.syntax_tree()
    change(docs, 2, at(1, 4, 8, "size"))  # `area`, in each of the 1,500 functions
    step = NextEdits([structure])
    hurried, _ = parse_options({"nextEdits": {"maxLatencyMs": 1}})
    assert await step.suggest(doc, 24, hurried) is None  # the source ran past its deadline
    loop = asyncio.get_running_loop()
    # (the loop turned meanwhile, the work was on the main thread)
    seen: list[tuple[bool, bool]] = []
    read = next_edit.candidates

    def waiting(*args: Any) -> list[Suggestion]:
        turned = threading.Event()
        loop.call_soon_threadsafe(turned.set)
        seen.append((turned.wait(5.0), threading.current_thread() is threading.main_thread()))
        return read(*args)

    monkeypatch.setattr(next_edit, "candidates", waiting)
    patient, _ = parse_options({"nextEdits": {"maxLatencyMs": 60_000}})
    found = await step.suggest(doc, 24, patient)
    assert found is not None and (found.kind, found.text) == ("rename", "size")
    assert seen == [(True, False)]  # off the main thread, and the loop turned while it waited
