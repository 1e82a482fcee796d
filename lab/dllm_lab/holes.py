"""Holes cut from real source files, one kind at a time, for calibrating and evaluating the span
planner. A hole is a document with its middle taken out and the cursor where the middle was,
placed as an editor user would have it:

- line: a line cut after its first word, the cursor at the cut, the rest of the line removed;
- expression: the inside of a one-line bracket pair, the cursor just after the opener;
- statement: a one-line statement among others, removed, its indentation left on a blank line;
- whole_line (EXTRA_KINDS): any line of code (not blank, not a comment), removed as a statement
  is: one line deleted from a file (`}` and `} else {` included);
- function_body / block_body: the statements of a body of 2-40 lines removed, the cursor on a
  blank line at the body's indentation (brace languages keep their braces);
- empty_body: (brace languages) the inside of a function body removed, the cursor between `{}`.

The middle is exactly the text taken out, so "true length" means its tokens.

`Hole` is the one evaluation hole of lab/: the span evaluation (HumanEval infilling and held-out
lines), the model report, the cross-file evaluation and the drafts' evaluations cut theirs as
it, and score fills with `filled` (and a HumanEval hole's `check` program).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grammars
from infill_engine.drafts.gate import FAMILY
from infill_engine.stop import indent_width

HOLE_KINDS = ("line", "expression", "statement", "function_body", "block_body", "empty_body")
# Cut like a statement but not a kind the planner names (it plans such a hole as `statement`):
# for the drafts' evaluations.
EXTRA_KINDS = ("whole_line",)
_WORD = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Hole:
    kind: str  # how it was cut: one of HOLE_KINDS, or an evaluation's own ("humaneval", ...)
    language_id: str
    text: str  # the document without the middle
    offset: int  # the cursor, a str offset into text
    middle: str  # what was taken out
    origin: str = ""  # the file it was cut from, relative to its root ("": not from a file)
    check: str | None = None  # a program run after the filled document (HumanEval's test and
    # its `check(...)` call) that passes when the fill is right; None: scored by exact match

    @classmethod
    def cut(
        cls,
        prefix: str,
        middle: str,
        suffix: str,
        kind: str,
        language_id: str = "python",
        origin: str = "",
        check: str | None = None,
    ) -> Hole:
        """The hole that `prefix + middle + suffix` leaves with its middle taken out."""
        return cls(kind, language_id, prefix + suffix, len(prefix), middle, origin, check)

    @property
    def prefix(self) -> str:
        return self.text[: self.offset]

    @property
    def suffix(self) -> str:
        return self.text[self.offset :]

    def filled(self, fill: str) -> str:
        """The document with `fill` where the middle was."""
        return self.text[: self.offset] + fill + self.text[self.offset :]


def holes(text: str, language_id: str, kind: str, rng: random.Random, n: int) -> list[Hole]:
    """Up to n holes of one kind from one file, drawn at random without repeats."""
    make = {
        "line": _line_holes,
        "expression": _expression_holes,
        "statement": _statement_holes,
        "whole_line": _whole_line_holes,
        "function_body": lambda t, lang: _body_holes(t, lang, "functions", "body"),
        "block_body": lambda t, lang: _body_holes(t, lang, "blocks", "block"),
        "empty_body": _empty_body_holes,
    }[kind]
    found = list(make(text, language_id))
    rng.shuffle(found)
    return found[:n]


def draw(
    files: Sequence[tuple[Path, str]], language_id: str, kind: str, rng: random.Random, n: int
) -> list[tuple[Path, Hole]]:
    """Up to n holes of one kind from a repository's files, each file picked at random for
    each hole and no hole twice (a small repository's few holes were drawn again and counted
    twice: 17 of 100 in one held-out Python repository); at most 20 n picks."""
    out: list[tuple[Path, Hole]] = []
    taken: set[tuple[Path, int, str]] = set()
    for _ in range(n * 20):
        if len(out) >= n or not files:
            break
        path, text = rng.choice(files)
        for hole in holes(text, language_id, kind, rng, len(text)):
            if (path, hole.offset, hole.middle) not in taken:
                taken.add((path, hole.offset, hole.middle))
                out.append((path, hole))
                break
    return out


def of_language(path: Path, language: str) -> bool:
    """Whether a file is of `language` by its extension (JSX counts as JavaScript, TSX as
    TypeScript)."""
    found = grammars.language_for_path(path.name)
    return found is not None and FAMILY.get(found, found) == language


def source_files(folder: Path, language: str, limit: int = 200_000) -> dict[Path, str]:
    """The folder's files of `language`, under `limit` characters, as text: not tests, nor
    docs, nor anything hidden."""
    files = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if "test" in rel or rel.startswith("docs/") or "/." in f"/{rel}":
            continue
        if not of_language(p, language) or not p.is_file():
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if 0 < len(text) < limit:
            files[p] = text
    return files


def _lines(text: str) -> Iterator[tuple[int, str]]:
    pos = 0
    for line in text.split("\n"):
        yield pos, line
        pos += len(line) + 1


def _is_code(line: str, language_id: str) -> bool:
    spec = grammars.spec(language_id)
    comment = spec.line_comment if spec is not None else "#"
    s = line.strip()
    return bool(s) and not s.startswith((comment, "/*", "*", '"""', "'''", "@"))


def _line_holes(text: str, language_id: str) -> Iterator[Hole]:
    for pos, line in _lines(text):
        if not _is_code(line, language_id) or len(line.strip()) < 8:
            continue
        words = list(_WORD.finditer(line))
        if len(words) < 3:
            continue
        cut = words[len(words) // 3].end()  # after a word, part-way along the line
        if cut >= len(line.rstrip()):
            continue
        middle = line[cut:].rstrip()
        doc = text[: pos + cut] + text[pos + len(line.rstrip()) :]
        yield Hole("line", language_id, doc, pos + cut, middle)


def _whole_line_holes(text: str, language_id: str) -> Iterator[Hole]:
    for pos, line in _lines(text):
        if not _is_code(line, language_id):
            continue
        start = pos + len(line) - len(line.lstrip(" \t"))
        end = pos + len(line.rstrip())
        yield Hole("whole_line", language_id, text[:start] + text[end:], start, text[start:end])


def _expression_holes(text: str, language_id: str) -> Iterator[Hole]:
    for pos, line in _lines(text):
        if not _is_code(line, language_id):
            continue
        for m in re.finditer(r"\(([^()\n]{3,80})\)", line):
            inner = m.group(1)
            if inner.count('"') % 2 or inner.count("'") % 2:
                continue
            start = pos + m.start(1)
            yield Hole(
                "expression", language_id, text[:start] + text[pos + m.end(1) :], start, inner
            )
            break


def _tree(text: str, language_id: str):  # type: ignore[no-untyped-def]
    parser = grammars.parser(language_id)
    return None if parser is None else parser.parse(text.encode("utf-8")).root_node


def _char(text_bytes: bytes, byte: int) -> int:
    return len(text_bytes[:byte].decode("utf-8", "replace"))


def _statement_holes(text: str, language_id: str) -> Iterator[Hole]:
    root = _tree(text, language_id)
    if root is None:
        return
    raw = text.encode("utf-8")
    for node in grammars.captures(language_id, "statements", root).get("statement", []):
        if node.start_point.row != node.end_point.row or node.parent is None:
            continue
        if node.parent.named_child_count < 3 or node.type.endswith(
            ("if_statement", "for_statement")
        ):
            continue
        start, end = _char(raw, node.start_byte), _char(raw, node.end_byte)
        ls = text.rfind("\n", 0, start) + 1
        le = text.find("\n", end)
        le = len(text) if le < 0 else le
        if text[ls:start].strip() or text[end:le].strip():
            continue  # the statement shares its line with other code
        middle = text[start:end]
        if len(middle) < 4:
            continue
        yield Hole("statement", language_id, text[:start] + text[end:], start, middle)


def _body_holes(text: str, language_id: str, query: str, capture: str) -> Iterator[Hole]:
    root = _tree(text, language_id)
    if root is None:
        return
    raw = text.encode("utf-8")
    braces = (grammars.spec(language_id) or _NO_SPEC).block_style == "brace"
    seen = set()
    if query == "blocks":  # a function's body is a function_body hole, lambdas' included
        functions = grammars.captures(language_id, "functions", root).get("body", [])
        seen = {n.start_byte for n in functions}
    for node in grammars.captures(language_id, query, root).get(capture, []):
        rows = node.end_point.row - node.start_point.row
        if not 2 <= rows <= 40 or node.start_byte in seen:
            continue
        seen.add(node.start_byte)
        body = text[_char(raw, node.start_byte) : _char(raw, node.end_byte)]
        base = _char(raw, node.start_byte)
        if braces:
            if not body.startswith("{") or not body.endswith("}"):
                continue
            inner = body[1:-1]
            first = len(inner) - len(inner.lstrip())
            last = len(inner.rstrip())
            if last <= first or "\n" not in inner[:first]:
                continue
            start, end = base + 1 + first, base + 1 + last
        else:
            start, end = base, base + len(body.rstrip())
        ls = text.rfind("\n", 0, start) + 1
        if text[ls:start].strip() or end <= start:
            continue  # the body starts on its header's line
        kind = "function_body" if query == "functions" else "block_body"
        yield Hole(kind, language_id, text[:start] + text[end:], start, text[start:end])


def _empty_body_holes(text: str, language_id: str) -> Iterator[Hole]:
    spec = grammars.spec(language_id)
    if spec is None or spec.block_style != "brace":
        return
    for hole in _body_holes(text, language_id, "functions", "body"):
        ls = hole.text.rfind("\n", 0, hole.offset) + 1
        le = hole.text.find("\n", hole.offset)
        # `{` + middle + `}`: take the line break and the closing brace's indentation out too
        open_at = hole.text.rfind("{", 0, hole.offset)
        close_at = hole.text.find("}", hole.offset)
        if open_at < 0 or close_at < 0 or le < 0 or not (open_at < ls):
            continue
        middle = (
            hole.text[open_at + 1 : hole.offset] + hole.middle + hole.text[hole.offset : close_at]
        )
        doc = hole.text[: open_at + 1] + hole.text[close_at:]
        if indent_width(middle.split("\n")[-1]) > 40:
            continue
        yield Hole("empty_body", language_id, doc, open_at + 1, middle)


@dataclass(frozen=True)
class _NoSpec:
    block_style: str = "indent"


_NO_SPEC = _NoSpec()
