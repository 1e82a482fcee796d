"""The signature rule: a definition's parameter list changed by one parameter, and the nearest
call of that name with the old number of arguments follows (an argument removed, or the new
parameter's name passed in its place)."""

from __future__ import annotations

import re

from ..lexer import group_end, parts
from .history import Edit
from .suggestion import Suggestion
from .text import line_of, words

MAX_SCAN_CHARS = 400_000  # calls are looked for within this of the edit


def signature(text: str, last: Edit) -> list[Suggestion]:
    """A definition's parameter list changed by one parameter: the nearest call with the old
    number of arguments follows."""
    old_sig, new_sig = _header(last.lines_before), _header(last.lines_after)
    if old_sig is None or new_sig is None or old_sig[0] != new_sig[0]:
        return []
    name, old_params, new_params = old_sig[0], old_sig[1], new_sig[1]
    if abs(len(old_params) - len(new_params)) != 1:
        return []
    removed = len(new_params) < len(old_params)
    short, long = (new_params, old_params) if removed else (old_params, new_params)
    k = next((i for i in range(len(short)) if short[i] != long[i]), len(short))
    if short != long[:k] + long[k + 1 :]:
        return []
    added = long[k]
    if not removed and ("=" in added or added.startswith("*")):
        return []  # a default or a rest parameter asks nothing of the callers
    arg_name = re.match(r"[A-Za-z_$][\w$]*", added.split(":")[0].strip().lstrip("&*"))
    if not removed and arg_name is None:
        return []
    edited = line_of(text, last.start)[0], line_of(text, last.end)[1]
    best: Suggestion | None = None
    for m in words(text, name, max(0, last.start - MAX_SCAN_CHARS), last.start + MAX_SCAN_CHARS):
        if edited[0] <= m.start() < edited[1] or not text.startswith("(", m.end()):
            continue
        args = _arguments(text, m.end())
        if args is None or len(args) != len(old_params):
            continue
        spans = args
        if removed:
            a, b = spans[k]
            if k + 1 < len(spans):
                b = spans[k + 1][0]
            elif k > 0:
                a = spans[k - 1][1]
            sug = Suggestion(a, b, "", "signature", 0.75)
        else:
            assert arg_name is not None
            word = arg_name.group(0)
            if k < len(spans):
                at = spans[k][0]
                sug = Suggestion(at, at, f"{word}, ", "signature", 0.55)
            else:
                at = spans[-1][1] if spans else m.end() + 1
                sug = Suggestion(at, at, f", {word}" if spans else word, "signature", 0.55)
        if best is None or abs(sug.start - last.start) < abs(best.start - last.start):
            best = sug
    return [best] if best is not None else []


_HEADER = re.compile(
    r"(?:def|fn|func|function)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)\s*(?:<[^>]*>)?\s*\(([^)]*)\)"
    r"|([A-Za-z_$][\w$]*)\s*\(([^()]*)\)\s*(?:const\s*)?(?:->[^{]*)?\{"
)


def _header(line: str) -> tuple[str, list[str]] | None:
    m = _HEADER.search(line)
    if m is None:
        return None
    name, params = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    if name in ("if", "for", "while", "switch", "catch", "return"):
        return None
    parts = [p.strip() for p in _split_top(params)]
    return name, [p for p in parts if p and p not in ("self", "cls", "this")]


def _split_top(s: str) -> list[str]:
    out, depth, cur = list[str](), 0, list[str]()
    for ch in s:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _arguments(text: str, open_at: int) -> list[tuple[int, int]] | None:
    """The str spans of a call's arguments (stripped) from its "(" at open_at; None when it
    does not close within a few lines' worth of text."""
    window = text[open_at : open_at + 2000]
    end = group_end(window, 0)
    if end is None:
        return None
    inner, base = window[1 : end - 1], open_at + 1
    out = []
    for a, b in parts(inner):
        piece = inner[a:b]
        lead = len(piece) - len(piece.lstrip())
        out.append((base + a + lead, base + a + len(piece.rstrip())))
    return [] if out == [(base, base)] else out
