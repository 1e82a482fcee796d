"""The prompt of a hosted next-edit API (Inception's Mercury Edit, hosted_edit.py) and the reading
of its answer: pure functions, no I/O.

The prompt is one user message of four tagged sections, in this order (Inception's next-edit
guide and its SDK's example; the editable region inside the current file, as Zed's and other
clients of the API write it):

    <|recently_viewed_code_snippets|>
    <|recently_viewed_code_snippet|>
    code_snippet_file_path: PATH
    EXCERPT
    <|/recently_viewed_code_snippet|>          (one per snippet; none: an empty line)
    <|/recently_viewed_code_snippets|>
    <|current_file_content|>
    current_file_path: PATH
    LINES BEFORE THE REGION
    <|code_to_edit|>
    THE REGION, <|cursor|> WHERE THE CURSOR IS
    <|/code_to_edit|>
    LINES AFTER THE REGION
    <|/current_file_content|>
    <|edit_diff_history|>
    --- PATH
    +++ PATH
    @@ -L,n +L,m @@
    -old line
    +new line                                   (one unified diff per edit, the newest last;
    <|/edit_diff_history|>                       none: an empty line)

- The editable region (`region`): the cursor's line, REGION_BEFORE lines above it and
  REGION_AFTER below, whole lines, at most MAX_REGION_CHARS (the farthest lines dropped first).
- The current file (`window`): whole lines around the region, at most MAX_FILE_CHARS.
- The edit history (`diffs`): each `Edit`'s touched lines before and after, as a unified diff
  (difflib) whose hunk header gives the lines' place in the file now; the newest edits kept
  within MAX_HISTORY_CHARS.
- Recently viewed snippets: the last MAX_VIEWED excerpts, each at most MAX_VIEWED_CHARS.
- Paths are a URI's last PATH_PARTS path segments: enough to tell files apart, and no home
  directory (a user's name) is sent.
- What looks like a credential (infill_engine/finish/secrets.py) is not sent: a snippet or an
  edit that holds one is left out, a line of the current file outside the region is sent
  empty, and a region that holds one is not sent at all (no request).

The answer (`rewrite`) is the region rewritten, maybe inside ``` fences (the guide says it
comes enclosed in them; its reference example has none): the fences and any `<|cursor|>` are
removed, the region's last newline kept as it was (and its CRLF line ends, where the
answer has only LF). `replacement` trims what the rewrite and
the region share at both ends to one minimal replacement; a rewrite that deletes most of the
region or is many times its length is not taken (a broken answer, not an edit).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from infill_engine.edits.history import Edit
from infill_engine.edits.history import replacement as smallest
from infill_engine.finish import secrets

REGION_BEFORE = 5  # lines above the cursor's in the editable region
REGION_AFTER = 10  # lines below it (the next edit is more often below)
MAX_REGION_CHARS = 2000  # ~600 tokens: the rewrite stays well under a suggestion's 4000
MAX_FILE_CHARS = 12_000  # the current file sent around the region (~3.5k tokens)
MAX_HISTORY_CHARS = 6000  # the edit diffs, the newest kept (16 edits of a few lines fit)
MAX_VIEWED = 5  # the guide asks for 3-5 snippets of about 20 lines
MAX_VIEWED_CHARS = 1500  # one snippet (20 lines of 75 characters)
PATH_PARTS = 3  # a URI's last path segments shown as its path
MIN_KEPT = 0.5  # a rewrite shorter than this share of the region deletes most of it
MAX_GROWTH = 4.0  # a rewrite longer than this many times the region (+ GROWTH_SLACK) is not one
GROWTH_SLACK = 200  # characters: a short region may gain a few lines

CURSOR = "<|cursor|>"
_FENCED = re.compile(r"\s*```[\w.+-]*[ \t]*\n(?P<body>.*?)\n?```\s*", re.S)
_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


@dataclass(frozen=True)
class Region:
    """text[start:end], whole lines around the cursor; `cursor` is a str offset within them."""

    start: int
    end: int
    cursor: int


def path_of(uri: str) -> str:
    """A URI's last PATH_PARTS path segments: `file:///home/me/p/src/a.py` -> `p/src/a.py`."""
    path = unquote(urlsplit(uri).path) or uri
    parts = [p for p in path.split("/") if p]
    return "/".join(parts[-PATH_PARTS:]) or "untitled"


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _line_end(text: str, offset: int) -> int:
    """Past the newline of offset's line (or the text's end)."""
    end = text.find("\n", offset)
    return len(text) if end < 0 else end + 1


def region(text: str, cursor: int) -> Region | None:
    """The editable region around `cursor`, or None when its own line passes MAX_REGION_CHARS."""
    cursor = max(0, min(cursor, len(text)))
    start, end = _line_start(text, cursor), _line_end(text, cursor)
    if end - start > MAX_REGION_CHARS:
        return None
    above: list[int] = []  # the starts of lines above, nearest first
    below: list[int] = []  # the ends of lines below, nearest first
    for _ in range(REGION_BEFORE):
        s = start if not above else above[-1]
        if s == 0:
            break
        above.append(_line_start(text, s - 1))
    for _ in range(REGION_AFTER):
        e = end if not below else below[-1]
        if e >= len(text):
            break
        below.append(_line_end(text, e))
    # grow one line at a time, alternating, while the budget allows: nearest lines first
    for i in range(max(len(above), len(below))):
        if i < len(below) and below[i] - start <= MAX_REGION_CHARS:
            end = below[i]
        if i < len(above) and end - above[i] <= MAX_REGION_CHARS:
            start = above[i]
    return Region(start, end, cursor)


def window(text: str, r: Region) -> tuple[int, int]:
    """[lo, hi): whole lines around the region, at most MAX_FILE_CHARS in all; the budget not
    used on one side goes to the other."""
    room = max(0, MAX_FILE_CHARS - (r.end - r.start))
    before, after = r.start, len(text) - r.end
    take_before = min(before, max(room // 2, room - after))
    take_after = min(after, room - take_before)
    lo, hi = r.start - take_before, r.end + take_after
    if lo > 0:
        lo = _line_end(text, lo) if text[lo - 1] != "\n" else lo  # a cut line is left out
        lo = min(lo, r.start)
    if hi < len(text):
        hi = max(_line_start(text, hi), r.end)
    return lo, hi


def _clean_lines(text: str) -> str:
    """`text` with each line that holds a credential sent empty."""
    lines = text.split("\n")
    return "\n".join("" if secrets.find(line) else line for line in lines)


def _with_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def diff(path: str, edit: Edit, text: str) -> str:
    """One edit as a unified diff of the lines it touched, numbered as they stand in `text`."""
    line = text.count("\n", 0, min(edit.start, len(text)))  # lines above the edit's first
    before, after = edit.lines_before.split("\n"), edit.lines_after.split("\n")
    out = [f"--- {path}", f"+++ {path}"]
    for row in list(difflib.unified_diff(before, after, lineterm=""))[2:]:  # its own ---/+++
        m = _HUNK.match(row)
        if m:
            a, b = int(m.group(1)) + line, int(m.group(3)) + line
            row = f"@@ -{a}{m.group(2) or ''} +{b}{m.group(4) or ''} @@" + row[m.end() :]
        out.append(row)
    return "\n".join(out) + "\n"


def diffs(path: str, edits: Sequence[Edit], text: str) -> str:
    """The edits' diffs, oldest first, the newest that fit MAX_HISTORY_CHARS; none that holds a
    credential."""
    kept: list[str] = []
    size = 0
    for edit in reversed(edits):
        d = diff(path, edit, text)
        if secrets.find(d):
            continue
        if size + len(d) > MAX_HISTORY_CHARS:
            break
        kept.append(d)
        size += len(d)
    return "".join(reversed(kept))


def _snippet(uri: str, excerpt: str) -> str | None:
    if len(excerpt) > MAX_VIEWED_CHARS:
        cut = excerpt.rfind("\n", 0, MAX_VIEWED_CHARS)
        excerpt = excerpt[: cut if cut > 0 else MAX_VIEWED_CHARS]
    if not excerpt.strip() or secrets.find(excerpt):
        return None
    return (
        "<|recently_viewed_code_snippet|>\n"
        f"code_snippet_file_path: {path_of(uri)}\n"
        f"{_with_newline(excerpt)}"
        "<|/recently_viewed_code_snippet|>\n"
    )


def _section(tag: str, body: str) -> str:
    """A tagged section; an empty one holds an empty line, as the guide asks."""
    return f"<|{tag}|>\n{body or chr(10)}<|/{tag}|>\n"


def prompt(
    uri: str,
    text: str,
    r: Region,
    edits: Sequence[Edit],
    viewed: Sequence[tuple[str, str]],
) -> str | None:
    """The user message for the region `r` of `text`; None when the region holds a credential."""
    code = text[r.start : r.end]
    if secrets.find(code):
        return None
    lo, hi = window(text, r)
    path = path_of(uri)
    snippets = [_snippet(u, x) for u, x in list(viewed)[-MAX_VIEWED:]]
    marked = code[: r.cursor - r.start] + CURSOR + code[r.cursor - r.start :]
    current = (
        f"current_file_path: {path}\n"
        f"{_clean_lines(text[lo : r.start])}"
        f"<|code_to_edit|>\n{_with_newline(marked)}<|/code_to_edit|>\n"
        f"{_with_newline(_clean_lines(text[r.end : hi]))}"
    )
    return (
        _section("recently_viewed_code_snippets", "".join(s for s in snippets if s))
        + _section("current_file_content", current)
        + _section("edit_diff_history", diffs(path, edits, text))
    )


def rewrite(content: str, code: str) -> str:
    """The answer's rewritten region: unfenced, without `<|cursor|>`, ending in a newline
    exactly when the region does."""
    m = _FENCED.fullmatch(content)
    body = m.group("body") if m else content
    body = body.replace(CURSOR, "")
    if "\r\n" in code and "\r\n" not in body:  # a model answers in \n; the document is CRLF
        body = body.replace("\n", "\r\n")
    if code.endswith("\n") and not body.endswith("\n"):
        body += "\r\n" if code.endswith("\r\n") else "\n"
    elif not code.endswith("\n") and body.endswith("\n"):
        body = body.removesuffix("\n").removesuffix("\r")
    return body


def replacement(code: str, new: str) -> tuple[int, int, str] | None:
    """The one minimal replacement (start, end, text), offsets into `code`, that makes `new` of
    it; None when there is none or `new` is not an edit of `code` (most of it gone, or many
    times longer)."""
    if new == code:
        return None
    kept = len(new.strip())
    if kept < MIN_KEPT * len(code.strip()) or len(new) > MAX_GROWTH * len(code) + GROWTH_SLACK:
        return None
    return smallest(code, new)
