"""What kind of hole the cursor is in, and the stop rule of the construct it fills: from the
cursor's line, the code lines around it (lexer.py reads code, strings and comments) and, for a
braced language, the grammar's innermost function or block."""

from __future__ import annotations

from dataclasses import replace

from .. import lexer
from ..lexer import CLOSERS
from ..stop import StopRule, indent_width
from .document import DocumentView
from .kinds import HoleKind


def classify(
    doc: DocumentView, before: str, after: str, braces: bool, comment: str
) -> tuple[HoleKind, StopRule]:
    text, offset = doc.text, doc.offset
    line_rule = StopRule("line", comment=comment)
    # A statement may open a block (Python's `:`; braces are counted as brackets anyway).
    statement_rule = StopRule("line", comment=comment, opener="" if braces else ":", statement=True)
    open_on_line = lexer.depth(before, comment) > 0
    code = lexer.strip_comment(before, comment).rstrip()
    opener = "{" if braces else ":"
    if after.strip() and not before:
        # At the start of a line of code: a statement inserted before it, ending in a newline.
        return "statement", replace(statement_rule, newline=True)
    if after.strip():
        if braces and code.endswith("{") and after.lstrip().startswith("}"):
            return "empty_body", StopRule("brace", comment=comment)  # `{|}`
        if open_on_line and after.lstrip()[:1] in CLOSERS:
            return "expression", StopRule("expression", comment=comment)
        return "line", line_rule
    if code:
        if code.endswith(opener) and lexer.depth(code[:-1], comment) <= 0:
            kind = _body_kind(doc, code, braces)
            return kind, _block_rule(before, braces, comment)
        return "line", line_rule
    # a blank line: a body still to write, an empty body, or one more statement
    prev = _prev_code_line(text, offset - len(before), comment)
    cursor_indent = indent_width(before)
    nxt = _next_code_line(text, offset + len(after), comment)
    if prev is not None and lexer.strip_comment(prev, comment).rstrip().endswith(opener):
        header_indent = indent_width(prev)
        next_closes = nxt is None or (
            indent_width(nxt) <= header_indent
            if not braces
            else nxt.strip().startswith("}") and indent_width(nxt) <= header_indent
        )
        if next_closes or _placeholder(nxt, braces):
            kind = _body_kind(doc, lexer.strip_comment(prev, comment).rstrip(), braces)
            if nxt is not None and _placeholder(nxt, braces):
                kind = "empty_body"
            body_indent = max(cursor_indent, header_indent + 1)
            return kind, (
                StopRule("brace", comment=comment)
                if braces
                else StopRule("indent", indent=body_indent, comment=comment)
            )
    return "statement", statement_rule


def _block_rule(before: str, braces: bool, comment: str) -> StopRule:
    if braces:
        return StopRule("brace", comment=comment)
    return StopRule("indent", indent=indent_width(before) + 1, comment=comment)


def _body_kind(doc: DocumentView, header: str, braces: bool) -> HoleKind:
    """A function's body or another block's, from the grammar when there is one: whichever
    encloses the cursor more closely."""
    if not braces:
        words = header.lstrip().split("(", 1)[0].split()
        return (
            "function_body"
            if words[:1] == ["def"] or words[:2] == ["async", "def"]
            else ("block_body")
        )
    if doc.root() is None:
        return "block_body"
    byte = doc.byte

    def innermost(query: str, capture: str) -> int:
        # only the nodes around the cursor: a node holding it overlaps [byte - 1, byte + 1)
        nodes = doc.captures(query, capture, byte - 1, byte + 1)
        return max((n.start_byte for n in nodes if n.start_byte < byte <= n.end_byte), default=-1)

    function, block = innermost("functions", "body"), innermost("blocks", "block")
    return "function_body" if function >= 0 and function >= block else "block_body"


def _placeholder(line: str | None, braces: bool) -> bool:
    if line is None:
        return False
    s = line.strip()
    return s in ("pass", "...") if not braces else False


def _prev_code_line(text: str, line_start: int, comment: str) -> str | None:
    pos = line_start - 1
    while pos > 0:
        s = text.rfind("\n", 0, pos) + 1
        line = text[s:pos]
        if lexer.strip_comment(line, comment).strip():
            return line
        pos = s - 1
    return None


def _next_code_line(text: str, line_end: int, comment: str) -> str | None:
    pos = line_end + 1
    while pos < len(text):
        e = text.find("\n", pos)
        e = len(text) if e < 0 else e
        line = text[pos:e]
        if lexer.strip_comment(line, comment).strip():
            return line
        pos = e + 1
    return None
