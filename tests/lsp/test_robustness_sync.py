"""Incremental sync: the server's document model against a small model of the LSP rules.

The reference below is written from the spec, not from documents.py:
* lines end at "\\n", "\\r\\n" or "\\r" only;
* a character past the end of a line means the line's end, a line past the last line means the
  end of the document;
* a position inside a multi-unit character (half a surrogate pair in utf-16, part of a
  multi-byte character in utf-8) means that character's start (the rule positions.py uses);
* a reversed range is the same range with its ends swapped;
* a lone surrogate in the text becomes U+FFFD (one code point and one utf-16 unit, like it);
* a change that breaks the schema stops the notification there: the changes before it stay
  applied, and the document is out of sync until a full-text change or a didOpen.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from lsp_client import inline, open_doc, plain, start
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_server.workspace.documents import Documents

URI = "file:///work/sync.py"
MAX_UINT = 2**31 - 1


# -- the reference -----------------------------------------------------------------------------
def ref_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each LSP line, end before its break."""
    out, start = [], 0
    for m in re.finditer(r"\r\n|\r|\n", text):
        out.append((start, m.start()))
        start = m.end()
    return [*out, (start, len(text))]


def ref_width(ch: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(ch.encode("utf-8"))
    return 2 if encoding == "utf-16" and ord(ch) > 0xFFFF else 1


def ref_offset(text: str, line: int, character: int, encoding: str) -> int:
    lines = ref_lines(text)
    if line >= len(lines):
        return len(text)
    start, end = lines[line]
    used, i = 0, start
    while i < end and used + ref_width(text[i], encoding) <= character:
        used += ref_width(text[i], encoding)
        i += 1
    return i


def ref_clean(s: str) -> str:
    return "".join("\ufffd" if 0xD800 <= ord(c) < 0xE000 else c for c in s)


def ref_apply(text: str, change: Any, encoding: str) -> str | None:
    """The text after one change, or None when the change breaks the schema."""
    if not isinstance(change, dict) or not isinstance(change.get("text"), str):
        return None
    if "range" not in change:
        return ref_clean(change["text"])
    try:
        (a, b), (c, d) = [
            (p["line"], p["character"]) for p in (change["range"]["start"], change["range"]["end"])
        ]
    except (KeyError, TypeError):
        return None
    if not all(type(v) is int and 0 <= v <= MAX_UINT for v in (a, b, c, d)):
        return None
    x, y = ref_offset(text, a, b, encoding), ref_offset(text, c, d, encoding)
    x, y = min(x, y), max(x, y)
    return text[:x] + ref_clean(change["text"]) + text[y:]


# -- the state machine ---------------------------------------------------------------------------
PIECES = [
    "a",
    "bc",
    " ",
    "\n",
    "\r\n",
    "\r",
    "\u2028",
    "\u2029",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1d",
    "\x1e",
    "\x85",
    "😀",
    "中",
    "é",
    "\ud800",
    "\udfff",
]
texts = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
coords = st.integers(0, 6) | st.just(MAX_UINT)
positions = st.fixed_dictionaries({"line": coords, "character": coords})
ranges = st.fixed_dictionaries({"start": positions, "end": positions})
good_changes = st.fixed_dictionaries({"range": ranges, "text": texts}) | st.fixed_dictionaries(
    {"range": ranges, "text": texts, "rangeLength": st.integers(0, 9)}
)
bad_changes = st.sampled_from(
    [
        {
            "range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}},
            "text": "x",
        },
        {
            "range": {"start": {"line": 0, "character": 2**31}, "end": {"line": 0, "character": 0}},
            "text": "x",
        },
        {"range": {"start": {"line": 0}, "end": {"line": 0, "character": 0}}, "text": "x"},
        {
            "range": {"start": {"line": True, "character": 0}, "end": {"line": 0, "character": 0}},
            "text": "x",
        },
        {"range": None, "text": "x"},
        {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}},
        {"text": 5},
        "x",
        None,
    ]
)


class Sync(RuleBasedStateMachine):
    encoding = "utf-16"

    @initialize(text=texts)
    def open(self, text: str) -> None:
        self.docs = Documents()
        self.docs.open(URI, "python", 1, text)
        self.text, self.in_sync, self.version = ref_clean(text), True, 1

    def send(self, changes: list[Any]) -> str:
        self.version += 1
        params = {"textDocument": {"uri": URI, "version": self.version}, "contentChanges": changes}
        return self.docs.change(params, self.encoding)

    @rule(changes=st.lists(good_changes, min_size=1, max_size=3))
    def edit(self, changes: list[Any]) -> None:
        self.send(changes)
        if self.in_sync:
            for c in changes:
                self.text = ref_apply(self.text, c, self.encoding)  # type: ignore[assignment]

    @rule(
        before=st.lists(good_changes, max_size=2),
        bad=bad_changes,
        after=st.lists(good_changes, max_size=2),
    )
    def edit_with_a_bad_change(self, before: list[Any], bad: Any, after: list[Any]) -> None:
        outcome = self.send([*before, bad, *after])
        if self.in_sync:
            for c in before:
                self.text = ref_apply(self.text, c, self.encoding)  # type: ignore[assignment]
            assert outcome == "out of sync"  # the server tells the client once
        else:
            assert outcome == "ignored"
        self.in_sync = False

    @rule(text=texts, partial=st.lists(good_changes, max_size=2))
    def replace_all(self, text: str, partial: list[Any]) -> None:
        self.send([{"text": text}, *partial])
        self.text, self.in_sync = ref_clean(text), True
        for c in partial:
            self.text = ref_apply(self.text, c, self.encoding)  # type: ignore[assignment]

    @rule(text=texts)
    def reopen(self, text: str) -> None:
        self.version = 1
        self.docs.open(URI, "python", 1, text)
        self.text, self.in_sync = ref_clean(text), True

    @invariant()
    def same_document(self) -> None:
        if not hasattr(self, "docs"):
            return
        doc = self.docs.get(URI)
        assert doc is not None
        assert doc.in_sync == self.in_sync
        if self.in_sync:
            assert doc.text == self.text
            assert doc.version == self.version


class SyncUtf8(Sync):
    encoding = "utf-8"


TestSyncUtf16 = Sync.TestCase
TestSyncUtf8 = SyncUtf8.TestCase
for case in (TestSyncUtf16, TestSyncUtf8):
    case.settings = settings(max_examples=100, stateful_step_count=12, deadline=None)


# -- the cases from the issue, one by one --------------------------------------------------------
def edit(line: int, char: int, end_line: int, end_char: int, text: str) -> dict[str, Any]:
    start, end = {"line": line, "character": char}, {"line": end_line, "character": end_char}
    return {"range": {"start": start, "end": end}, "text": text}


@pytest.mark.parametrize(
    ("text", "change", "expected"),
    [
        ("abc", edit(0, 5, 0, 5, "X"), "abcX"),  # past the line's end: its end
        ("abc\r\ndef", edit(0, 4, 0, 4, "X"), "abcX\r\ndef"),  # never between \r and \n
        ("a\u2028b\x0cc\nd", edit(1, 0, 1, 0, "X"), "a\u2028b\x0cc\nXd"),  # not breaks
        ("abcdef", edit(0, 4, 0, 1, "X"), "aXef"),  # reversed: swapped
        ("a😀b", edit(0, 2, 0, 2, "X"), "aX😀b"),  # inside a pair: its start
        ("ab\ncd", edit(7, 0, 9, 0, "X"), "ab\ncdX"),  # past the last line: the end
        ("ab", edit(0, 1, 0, 1, "\ud800"), "a\ufffdb"),
    ],
)
def test_the_issue_cases(text: str, change: dict[str, Any], expected: str) -> None:
    docs = Documents()
    docs.open(URI, "python", 1, text)
    params = {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [change]}
    assert docs.change(params, "utf-16") == "applied"
    doc = docs.get(URI)
    assert doc is not None and doc.text == expected and doc.version == 2


def test_a_bad_change_keeps_the_ones_before_it_and_marks_the_document() -> None:
    docs = Documents()
    docs.open(URI, "python", 1, "abc")
    bad = {
        "textDocument": {"uri": URI, "version": 2},
        "contentChanges": [edit(0, 0, 0, 0, "X"), {"text": 5}, edit(0, 0, 0, 0, "Y")],
    }
    assert docs.change(bad, "utf-16") == "out of sync"
    doc = docs.get(URI)
    assert doc is not None and doc.text == "Xabc" and not doc.in_sync
    later = {"textDocument": {"uri": URI, "version": 3}, "contentChanges": [edit(0, 0, 0, 0, "Z")]}
    assert docs.change(later, "utf-16") == "ignored"  # told once; still out of sync
    full = {"textDocument": {"uri": URI, "version": 4}, "contentChanges": [{"text": "new"}]}
    assert docs.change(full, "utf-16") == "applied"
    doc = docs.get(URI)
    assert doc is not None and doc.text == "new" and doc.in_sync and doc.version == 4


# -- end to end ----------------------------------------------------------------------------------
def change(version: int, *edits: tuple[int, int, int, int, str]) -> lsp.DidChangeTextDocumentParams:
    return lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=URI, version=version),
        content_changes=[
            lsp.TextDocumentContentChangePartial(
                range=lsp.Range(lsp.Position(a, b), lsp.Position(c, d)), text=t
            )
            for a, b, c, d, t in edits
        ],
    )


async def test_edits_then_a_completion_see_the_editors_text(client: LanguageClient) -> None:
    await start(client, settings={"decode": {"maxSpan": 8, "span": 8}, "candidates": 1})
    text = "def f(x):\r\n    y = 'a\u2028b'\r\n    return x\r\n"
    open_doc(client, URI, text)
    client.text_document_did_change(
        change(2, (0, 99, 0, 99, "  # one"), (1, 4, 1, 4, "z = 2\r    "))
    )
    client.text_document_did_change(
        change(3, (3, 12, 3, 12, " + y"), (3, 99, 3, 4, "return x + y"))
    )
    expected = "def f(x):  # one\r\n    z = 2\r    y = 'a\u2028b'\r\n    return x + y\r\n"
    status = plain(await client.protocol.send_request_async("dllm/status", None))
    digest = hashlib.sha256(expected.encode()).hexdigest()
    (doc,) = [d for d in status["documents"] if d["uri"] == URI]
    assert doc == {"uri": URI, "version": 3, "inSync": True, "sha256": digest}
    # mid-line, after "return ": an item covers the rest of the line, so its range ends where
    # the server's line 3 ends, "    return x + y" in the editor's text (the builtin model
    # offers something here; after "return x" it offers nothing, which would prove nothing)
    items = await inline(client, URI, 3, 11)
    assert items
    rest = lsp.Range(lsp.Position(3, 11), lsp.Position(3, 16))
    assert all(i.range == rest for i in items), [i.range for i in items]
