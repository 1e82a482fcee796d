"""A hosted next-edit API as the "hosted" tier (lsp_server/engines/hosted_edit.py): against a
Mercury Edit-shaped stand-in on loopback (edit_standin.py: the documented request and answer).
A rewrite becomes the one minimal suggestion; the request carries the edit history as diffs
and the cursor tag; each failure a user meets (a refused key, 429 with Retry-After, no answer
in time, no server, a 5xx) and each hostile answer gives no suggestion and never a crash; the
key shows nowhere."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from edit_standin import CURSOR, KEY, MODEL, SECTIONS, Answer, Standin
from fim_standin import running

from infill_engine.edits.history import Edit, History
from infill_engine.edits.suggestion import Suggestion
from infill_engine.finish import secrets
from lsp_server.engines import edit_prompt
from lsp_server.engines.hosted_edit import (
    DEFAULT_MODEL,
    SCORE,
    HostedEdits,
    edit_key,
    parse_edit_address,
)

URI = "file:///home/someone/proj/src/shapes.py"
BEFORE = "def area(w, h):\n    return w * h\n\n\nprint(area(2, 3))\n"
RENAMED = "def area(width, h):\n    return w * h\n\n\nprint(area(2, 3))\n"
CURSOR_AT = len("def area(width")
WANTED = "def area(width, h):\n    return width * h\n\n\nprint(area(2, 3))\n"


def history() -> list[Edit]:
    h = History()
    h.record(BEFORE, 9, 10, "width")  # `w` renamed in one didChange
    return h.edits()


def finish_rename(region: str) -> str:
    return region.replace("return w * h", "return width * h")


class Told:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def __call__(self, message: str) -> None:
        self.messages.append(message)


@pytest.fixture
def standin() -> Iterator[Standin]:
    with running(Standin(finish_rename)) as s:
        yield s


def engine(standin: Standin, told: Told | None = None, **kw: float) -> HostedEdits:
    return HostedEdits(standin.address, KEY, tell=told, **kw)  # type: ignore[arg-type]


async def ask(edits: HostedEdits, text: str = RENAMED, cursor: int = CURSOR_AT,
              viewed: tuple[tuple[str, str], ...] = ()) -> list[Suggestion]:  # fmt: skip
    # 30 s: a guard, so that a deadline that never fires fails here, not at the suite's timeout
    return await asyncio.wait_for(edits.suggest(URI, "python", text, cursor, history(), viewed), 30)


# -- a good answer --------------------------------------------------------------------------------
@pytest.mark.parametrize("fenced", [True, False])
async def test_a_rewrite_becomes_one_minimal_suggestion(standin: Standin, fenced: bool) -> None:
    standin.fenced = fenced
    edits = engine(standin)
    (s,) = await ask(edits)
    at = RENAMED.index("w * h") + 1  # `w` -> `width`: the common `w` and ` * h` trimmed
    assert s == Suggestion(at, at, "idth", "hosted", SCORE)
    assert s.applied(RENAMED) == WANTED
    (sent,) = standin.seen
    assert sent.problems == [] and sent.path == "/v1/edit/completions"
    assert sent.auth == f"Bearer {KEY}" and sent.body["model"] == MODEL == DEFAULT_MODEL
    await edits.aclose()


async def test_the_request_carries_the_diff_history_the_cursor_and_the_snippets(
    standin: Standin,
) -> None:
    edits = engine(standin)
    viewed = (("file:///home/someone/proj/src/util.py", "def square(x):\n    return x * x\n"),)
    await ask(edits, viewed=viewed)
    (sent,) = standin.seen
    content = sent.content
    assert sent.body["messages"] == [{"role": "user", "content": content}]
    starts = [content.index(f"<|{tag}|>") for tag in SECTIONS]
    assert starts == sorted(starts)  # the documented order
    assert sent.region.startswith(f"def area(width{CURSOR}, h):\n    return w * h\n")
    assert "current_file_path: proj/src/shapes.py\n" in content  # no home directory sent
    assert "/home/someone" not in content
    assert (
        "<|edit_diff_history|>\n--- proj/src/shapes.py\n+++ proj/src/shapes.py\n"
        "@@ -1 +1 @@\n-def area(w, h):\n+def area(width, h):\n<|/edit_diff_history|>\n"
    ) in content
    assert (
        "<|recently_viewed_code_snippet|>\ncode_snippet_file_path: proj/src/util.py\n"
        "def square(x):\n    return x * x\n<|/recently_viewed_code_snippet|>\n"
    ) in content
    await edits.aclose()


async def test_no_history_and_no_snippets_are_empty_sections(standin: Standin) -> None:
    edits = engine(standin)
    await asyncio.wait_for(edits.suggest(URI, "python", RENAMED, CURSOR_AT, [], []), 30)
    (sent,) = standin.seen
    assert sent.problems == []
    assert (
        "<|recently_viewed_code_snippets|>\n\n<|/recently_viewed_code_snippets|>\n" in sent.content
    )
    assert sent.content.endswith("<|edit_diff_history|>\n\n<|/edit_diff_history|>\n")
    await edits.aclose()


async def test_an_answer_equal_to_the_region_is_no_suggestion() -> None:
    with running(Standin(lambda region: region)) as standin:
        edits = engine(standin)
        assert await ask(edits) == []
        assert len(standin.seen) == 1 and edits.error is None
        await edits.aclose()


async def test_what_looks_like_a_credential_is_neither_sent_nor_suggested(
    standin: Standin, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    secret_line = 'API_TOKEN = "ghp_' + "a1B2c3D4e5" * 4 + '"\n'
    text = RENAMED + "\n" * 20 + secret_line  # outside the region: sent as an empty line
    viewed = (("file:///p/keys.py", secret_line), ("file:///p/ok.py", "x = 1\n"))
    edits = engine(standin)
    (s,) = await ask(edits, text=text, viewed=viewed)
    assert s.applied(text).startswith(WANTED)
    content = standin.seen[0].content
    assert "ghp_" not in content and "keys.py" not in content and "ok.py" in content

    # a region holding one is not sent at all
    inside = secret_line + RENAMED
    assert await ask(edits, text=inside, cursor=len(secret_line) + CURSOR_AT) == []
    assert len(standin.seen) == 1

    # an answer holding one is dropped, and counted
    before = secrets.FILTERED.total()
    standin.rewrite = lambda region: finish_rename(region) + secret_line
    assert await ask(edits) == []
    assert secrets.FILTERED.total() == before + 1
    assert "credential; dropped" in caplog.text
    await edits.aclose()


# -- failures -------------------------------------------------------------------------------------
async def test_a_refused_key_is_told_once_and_nothing_more_is_asked(
    standin: Standin, caplog: pytest.LogCaptureFixture
) -> None:
    told = Told()
    edits = HostedEdits(standin.address, "sk-wrong-key-0123456789", tell=told)
    assert await ask(edits) == []
    assert await ask(edits) == []  # no request: the key was refused
    assert len(standin.seen) == 1
    (message,) = told.messages
    assert "refused the key (HTTP 401)" in message and "$DLLM_API_KEY" in message
    everything = json.dumps([told.messages, edits.status(), caplog.text])
    assert "sk-wrong-key" not in everything
    await edits.aclose()

    told = Told()
    edits = HostedEdits(standin.address, None, tell=told)  # no key at all
    assert await ask(edits) == [] and "no key is set" in told.messages[0]
    assert standin.seen[-1].auth is None
    await edits.aclose()


async def test_429_asks_nothing_until_retry_after_has_passed(standin: Standin) -> None:
    told = Told()
    edits = engine(standin, told)
    standin.plan = [Answer(429, {"Retry-After": "0.4"}, "Rate limit exceeded")]
    assert await ask(edits) == []
    assert await ask(edits) == []  # paused: nothing sent
    assert len(standin.seen) == 1 and 0.2 < edits.status()["hosted_paused_s"] <= 0.4
    (message,) = told.messages
    assert "rate limiting (HTTP 429); asking again in 0.4 s" in message
    await asyncio.sleep(0.45)
    (s,) = await ask(edits)  # passed: asked again, and it answers
    assert s.applied(RENAMED) == WANTED and len(standin.seen) == 2
    assert edits.error is None and len(told.messages) == 1
    await edits.aclose()


async def test_a_5xx_backs_off_doubling_and_a_success_clears_it(standin: Standin) -> None:
    told = Told()
    edits = engine(standin, told)
    standin.plan = [Answer(503, message="overloaded"), Answer(502)]
    assert await ask(edits) == []
    assert "HTTP 503: overloaded; asking again in 1 s" in (edits.error or "")
    edits.paused_until = 0.0  # the pause has passed
    assert await ask(edits) == [] and "asking again in 2 s" in (edits.error or "")
    assert len(told.messages) == 1  # once per episode
    edits.paused_until = 0.0
    assert len(await ask(edits)) == 1 and edits.pauses.failures == 0
    await edits.aclose()


async def test_an_error_message_that_echoes_the_key_is_shown_without_it(
    standin: Standin, caplog: pytest.LogCaptureFixture
) -> None:
    told = Told()
    edits = engine(standin, told)
    standin.plan = [Answer(402, message=f"Account inactive for key {KEY}\x1b[2J")]
    assert await ask(edits) == []
    (message,) = told.messages
    assert "HTTP 402: Account inactive for key ***\\x1b[2J; asking again in 1 s" in message
    assert KEY not in caplog.text and KEY not in json.dumps(edits.status())
    await edits.aclose()


async def test_no_answer_within_the_deadline_is_no_suggestion(
    standin: Standin, caplog: pytest.LogCaptureFixture
) -> None:
    edits = engine(standin, deadline_s=0.3)
    held = threading.Event()  # the stand-in answers only after the engine gave up
    standin.plan = [Answer(held=held)]
    t0 = time.monotonic()
    try:
        assert await ask(edits) == []
    finally:
        held.set()
    assert time.monotonic() - t0 < 2.0
    assert "no answer from" in caplog.text and "within 0.3 s" in caplog.text
    await edits.aclose()


async def test_no_server_is_no_suggestion(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    told = Told()
    edits = HostedEdits(f"mercury+http://127.0.0.1:{port}/v1", KEY, tell=told)
    assert await ask(edits) == []
    assert "is unreachable" in caplog.text and len(told.messages) == 1
    assert KEY not in caplog.text
    await edits.aclose()


# -- hostile answers ------------------------------------------------------------------------------
def _chat(content: object) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": {"content": content}}]}).encode()


@pytest.mark.parametrize(
    ("answer", "logged"),
    [
        (Answer(huge=1 << 20), "larger than 64 KiB"),
        (Answer(raw=b"<html>502 Bad Gateway</html>"), "not JSON"),
        (Answer(raw=b'{"choices": []}'), "no choices[0].message.content"),
        (Answer(raw=b'{"error": null}'), "no choices[0].message.content"),
        (Answer(raw=_chat(5)), "is not a string"),
        (Answer(raw=_chat("```\n```")), "is not an edit"),  # deletes the whole region
        (Answer(raw=_chat("x = 1\n" * 2000)), "is not an edit"),  # many times longer
    ],
)
async def test_a_hostile_answer_is_no_suggestion_and_a_log_line(
    standin: Standin, caplog: pytest.LogCaptureFixture, answer: Answer, logged: str
) -> None:
    caplog.set_level(logging.INFO)
    edits = engine(standin)
    standin.plan = [answer]
    assert await ask(edits) == []
    assert logged in caplog.text
    assert len(await ask(edits)) == 1  # no pause: the next answer is taken
    assert KEY not in caplog.text
    await edits.aclose()


# -- the parts ------------------------------------------------------------------------------------
def test_the_address_form_and_the_key() -> None:
    a = parse_edit_address("mercury+https://api.inceptionlabs.ai/v1/")
    assert (a.base, a.url) == (
        "https://api.inceptionlabs.ai/v1",
        "https://api.inceptionlabs.ai/v1/edit/completions",
    )
    a = parse_edit_address("mercury+http://127.0.0.1:8080/v1/edit/completions")
    assert a.base == "http://127.0.0.1:8080/v1" and a.url.endswith("/v1/edit/completions")
    bad = ("https://x/v1", "mercury+ftp://x/v1", "mercury+https:///v1", "mercury+https://x/v1?k=1",
           "mercury+https://x:99999/v1", "mercury+https://x /v1")  # fmt: skip
    for address in bad:
        with pytest.raises(ValueError, match=r"mercury\+|port|query"):
            parse_edit_address(address)
    with pytest.raises(ValueError, match="credentials") as e:
        parse_edit_address("mercury+https://me:sk-secret-123@x/v1")
    assert "sk-secret" not in str(e.value)
    assert edit_key("sk-a", env={"DLLM_API_KEY": "sk-b"}) == "sk-a"
    assert edit_key(None, env={"DLLM_API_KEY": "sk-b"}) == "sk-b"
    assert edit_key(None, "MY_KEY", env={"DLLM_API_KEY": "sk-b"}) is None


def test_the_region_is_whole_lines_around_the_cursor_and_bounded() -> None:
    text = "".join(f"line {i}\n" for i in range(40))
    cursor = text.index("line 20") + 3
    r = edit_prompt.region(text, cursor)
    assert r is not None and r.cursor == cursor
    assert text[r.start : r.end] == "".join(f"line {i}\n" for i in range(15, 31))
    long_lines = "".join(f"{i:03d}" + "x" * 296 + "\n" for i in range(40))  # 300 a line
    r = edit_prompt.region(long_lines, long_lines.index("020"))
    assert r is not None and r.end - r.start <= edit_prompt.MAX_REGION_CHARS
    assert long_lines[r.start : r.end].count("\n") == 6  # the nearest lines, below first
    assert long_lines[r.start :].startswith("018") and long_lines[r.end :].startswith("024")
    assert edit_prompt.region("x" * 5000, 10) is None  # one line past the bound: not sent
    big = "".join(f"row {i}\n" for i in range(5000))
    r = edit_prompt.region(big, big.index("row 2500"))
    assert r is not None
    lo, hi = edit_prompt.window(big, r)
    assert hi - lo <= edit_prompt.MAX_FILE_CHARS and lo <= r.start and r.end <= hi
    assert big[lo - 1] == "\n" and big[hi - 1] == "\n"  # whole lines


def test_an_edit_is_a_diff_numbered_where_its_lines_are_now() -> None:
    before = "a = 1\nb = 2\nc = 3\nd = 4\n"
    h = History()
    h.record(before, before.index("c = 3"), before.index("c = 3") + 5, "c = 30\nc2 = 31")
    after = before.replace("c = 3", "c = 30\nc2 = 31")
    (edit,) = h.edits()
    assert edit_prompt.diff("f.py", edit, after) == (
        "--- f.py\n+++ f.py\n@@ -3 +3,2 @@\n-c = 3\n+c = 30\n+c2 = 31\n"
    )


def test_a_crlf_document_keeps_its_line_ends() -> None:
    code = "x = 1\r\ny = 2\r\n"
    new = edit_prompt.rewrite("```\nx = 1\ny = 3\n```", code)
    assert new == "x = 1\r\ny = 3\r\n"
    assert edit_prompt.replacement(code, new) == (11, 12, "3")


def test_the_answer_is_unfenced_and_trimmed_to_one_replacement() -> None:
    code = "x = 1\ny = 2\n"
    assert edit_prompt.rewrite("```python\nx = 1\ny = 3\n```", code) == "x = 1\ny = 3\n"
    assert edit_prompt.rewrite(f"x = 1{CURSOR}\ny = 3", code) == "x = 1\ny = 3\n"
    assert edit_prompt.replacement(code, "x = 1\ny = 3\n") == (10, 11, "3")
    assert edit_prompt.replacement(code, code) is None
    assert edit_prompt.replacement(code, "") is None  # deletes it all
