"""Postprocessing: the raw model completion turned into the text the editor shows.

`postprocess` runs these steps in this order:

1. Line endings: the completion is worked on with "\\n" only and gets the document's ending
   ("\\r\\n" when that is the majority ending of prefix + suffix, else "\\n") back at the end.
2. Repetition loops and stutters (repeat.py, `cut_repeats`): the completion ends where a short
   run starts to repeat over and over (`path.path.path.path.path.` and `.g.g.g.g.g.g` go whole,
   a line written again and again is kept once), so a model that has lost the thread shows
   nothing rather than the loop. In every language, plain text included.
3. Mid-line fill: when the cursor line has non-blank text after the cursor, only the first line
   of the completion is kept, since an infill inside a line must not insert new lines. The
   same for `one_line` (an automatic completion outside an empty block or body).
4. Reindent from the model's indentation unit to the document's (`indent`, the editor's
   formatting options, when given; else detected around the cursor). This comes before step 5
   so that the completion is compared with the suffix in the suffix's own indentation.
5. `drop_suffix_overlap`: text the model repeated from the start of the suffix is removed, and
   then the closing brackets at its end that the suffix already closes (`drop_closed_brackets`).
   Brackets are read with the stop rules' lexer (infill_engine/lexer.py, `structure`): none in
   a string or a line comment (`comment`, the language's mark), so the finishing steps and the
   rule that ended the construct agree on which bracket closes what.
6. Trailing whitespace is dropped (`trim_trailing_blank`), except for the trailing spaces of a
   fill whose suffix goes on with a non-space character on the same line: there the space
   separates the fill from that character.
7. No doubled space: after code that ends in a space on the cursor line (`return `), the
   completion's leading spaces are dropped; the prefix already has the separator.
8. An empty or whitespace-only result is None: nothing to show.

The editing commands fill whole lines (`block_indent`): step 3 does not apply, step 6 drops all
trailing whitespace, and the first line gets the body's indentation.

The package's `finish` runs this and then the syntax check, for the language server's inline
items and commands and for `dllm-infill fill` alike.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from .. import lexer
from ..fields import is_int
from ..lexer import CLOSERS, OPENERS
from ..repeat import cut_repeats


@dataclass(frozen=True)
class Indent:
    """One indentation level: `width` times `char`."""

    char: str  # "\t" or " "
    width: int  # spaces per level (1 for tabs)


_DEFAULT = Indent(" ", 4)
# A level wider than this is alignment (a hanging continuation), not indentation.
_MAX_LEVEL = 8
_CLOSERS = frozenset(")]}>\"'`,;:.")
# How much text either side of the cursor tells the document's line ending, and its
# indentation (a few hundred lines suffice, and detection is the costliest step).
_WINDOW = 65_536
# The prefix whose open brackets the suffix's closers are read against (a bracket opened
# further out is not seen, and the closers are then dropped as before).
_BRACKET_WINDOW = 8000
_INDENT_WINDOW = 8_192


def _leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _is_comment_continuation(line: str) -> bool:
    # " * text" inside a /* */ block is offset by one space from the block's indentation.
    return line.lstrip(" \t").startswith("*")


def _space_width(widths: list[int], default: int) -> int:
    """The most common increase of indentation between consecutive lines."""
    steps = Counter(b - a for a, b in pairwise(widths) if 0 < b - a <= _MAX_LEVEL)
    if steps:
        return max(steps, key=lambda step: (steps[step], -step))
    # A lone indented line tells the width only up to a multiple; prefer the common units.
    indented = [w for w in widths if w > 0]
    for unit in (4, 2):
        if indented and all(w % unit == 0 for w in indented):
            return unit
    return default


def detect_indent(text: str, default: Indent = _DEFAULT) -> Indent:
    """The indentation unit of text: tabs or spaces by majority of indented lines, and for
    spaces the most common step between consecutive lines' indentation.

    Blank lines and comment-continuation lines (" * ...") are ignored; `default` answers for a
    text with no indented lines (and decides a tie between tabs and spaces).
    """
    lines = [
        line for line in text.split("\n") if line.strip() and not _is_comment_continuation(line)
    ]
    tabbed = sum(line.startswith("\t") for line in lines)
    spaced = sum(line.startswith(" ") for line in lines)
    if tabbed == spaced == 0:
        return default
    if tabbed > spaced or (tabbed == spaced and default.char == "\t"):
        return Indent("\t", 1)
    widths = [len(_leading(line)) for line in lines if not line.startswith("\t")]
    fallback = default.width if default.char == " " else _DEFAULT.width
    return Indent(" ", _space_width(widths, fallback))


def formatting_indent(options: Any) -> Indent | None:
    """The unit an editor's LSP `FormattingOptions` ({"tabSize": 4, "insertSpaces": true})
    give, or None when they are absent or malformed."""
    if not isinstance(options, dict):
        return None
    size, spaces = options.get("tabSize"), options.get("insertSpaces")
    if not isinstance(spaces, bool) or not is_int(size):
        return None
    if not spaces:
        return Indent("\t", 1)
    return Indent(" ", size) if 1 <= size <= _MAX_LEVEL else None


def _reindent_line(line: str, source: Indent, target: Indent) -> str:
    body = line.lstrip(source.char)
    count = len(line) - len(body)
    levels, remainder = divmod(count, source.width)
    return target.char * (levels * target.width) + " " * remainder + body


def reindent(completion: str, source: Indent, target: Indent) -> str:
    """Convert the leading indentation of each line from the source unit to the target unit.

    Whole levels are converted and leftover spaces kept. The first line continues the cursor
    line, so its leading whitespace is not indentation and stays as it is.
    """
    if source == target:
        return completion
    first, *rest = completion.split("\n")
    return "\n".join([first, *(_reindent_line(line, source, target) for line in rest)])


def _overlap_counts(tail: str) -> bool:
    """Whether a tail repeated from the suffix is distinctive enough to remove."""
    visible = [ch for ch in tail if not ch.isspace()]
    return len(visible) >= 2 or (len(visible) == 1 and visible[0] in _CLOSERS)


def _drop_repeated_tail(completion: str, suffix: str, comment: str) -> str:
    if not suffix:
        return completion
    # Longest first; a candidate tail must start with the suffix's first character.
    for start in range(max(0, len(completion) - len(suffix)), len(completion)):
        tail = completion[start:]
        repeated = completion[start] == suffix[0] and suffix.startswith(tail)
        if (
            repeated
            and _overlap_counts(tail)
            and not _closes_own(completion[:start], tail, comment)
        ):
            return completion[:start]
    return completion


def _brackets(text: str, comment: str) -> tuple[list[str], list[int]]:
    """One walk over the brackets of text's code (lexer.structure, as the stop rules read it:
    none in a string or a line comment): the brackets it opens and leaves open (innermost
    last), and the indices of its closing brackets that close a bracket opened before it."""
    stack: list[str] = []
    unmatched: list[int] = []
    for i, ch in lexer.structure(text, comment):
        if ch in OPENERS:
            stack.append(ch)
        elif ch in CLOSERS:
            if stack and stack[-1] == _PAIRS[ch]:
                stack.pop()
            elif not stack:
                unmatched.append(i)
    return stack, unmatched


def _closes_own(head: str, tail: str, comment: str) -> bool:
    """Whether tail closes a bracket that head opened: `g(a)` before `)` keeps its `)`. The
    tail is read in head's lexical state (a tail inside head's string has no brackets)."""
    own = len(_brackets(head, comment)[0])  # head's open brackets, innermost last
    opened = 0  # the tail's own, still open
    for i, ch in lexer.structure(head + tail, comment):
        if i < len(head):
            continue
        if ch in OPENERS:
            opened += 1
        elif ch in CLOSERS and opened:
            opened -= 1
        elif ch in CLOSERS:
            return own > 0
    return False


def _first_nonblank_line(text: str) -> str | None:
    # Found with str methods: the suffix may be the rest of a large document.
    first = len(text) - len(text.lstrip())
    if first == len(text):
        return None
    end = text.find("\n", first)
    return text[text.rfind("\n", 0, first) + 1 : None if end < 0 else end]


def _same_line(line: str, target: str) -> bool:
    if line.strip() != target.strip():
        return False
    # A line of closing brackets alone is too common to mean a repeat unless indented alike.
    return not all(ch in _CLOSERS for ch in target.strip()) or line.rstrip() == target.rstrip()


def _drop_repeated_line(completion: str, suffix: str) -> str:
    target = _first_nonblank_line(suffix)
    if target is None:
        return completion
    start = 0
    for line in completion.split("\n"):
        if line.strip() and _same_line(line, target):
            return completion[:start]
        start += len(line) + 1
    return completion


_PAIRS = dict(zip(CLOSERS, OPENERS, strict=True))  # ")" -> "("


def drop_closed_brackets(
    completion: str, suffix: str, comment: str = "#", prefix: str | None = None
) -> str:
    """Remove the closing brackets at the end of the completion (with the whitespace among and
    before them) that close brackets opened before the cursor, when the suffix, past its
    whitespace, closes them already in the same order (`a,\\n  b)` before `\\n)`: `a,\\n  b`).
    With the `prefix`, not where the suffix's closers are those of brackets opened further out:
    in `x = f({` + `a: { b: 1 }` before `\\n})`, the `}` closes the `{` of `a: {` and the
    suffix's `})` the two around it (kept, the suffix's run reads the same as the brackets left
    open; dropped, it would not). `comment` is the language's line comment mark (lexer.py): a
    bracket in it is no bracket."""
    closers = _brackets(completion, comment)[1]
    end = len(completion.rstrip())
    run: list[int] = []
    for i in reversed(closers):
        if completion[i + 1 : end].strip(" \t\n") or i >= end:
            break
        run.insert(0, i)
        end = i
    if not run:
        return completion
    needed = "".join(completion[i] for i in run)
    following = "".join(suffix[: len(needed) * 64].split())
    if not following.startswith(needed):
        return completion
    if prefix is not None and (
        _closes_outer(prefix, len(run), following, comment)
        or ("\n" not in completion and _closes_its_line(prefix, len(run), suffix, comment))
    ):
        return completion
    return completion[:end].rstrip(" \t\n") if completion[:end].strip() else ""


def _closes_its_line(prefix: str, kept: int, suffix: str, comment: str) -> bool:
    """Whether the last `kept` closers of a completion on one line close brackets opened on the
    cursor's own line while the suffix's closers stand on a later line: `unsafe { f(n) }` before
    `\n    }\n}` keeps its `}` (a block on one line), though the suffix's closers, its outer
    blocks', read the same. On held-out Rust holes the true line lost its `}` so at 2 of 240."""
    line = prefix[prefix.rfind("\n") + 1 :]
    return len(_brackets(line, comment)[0]) >= kept and "\n" in suffix[: -len(suffix.lstrip())]


def _closes_outer(prefix: str, kept: int, following: str, comment: str) -> bool:
    """Whether the suffix's leading closers (`following`, whitespace removed) close exactly
    the brackets the prefix leaves open once the completion's last `kept` closers have closed
    its innermost ones, and not those innermost ones themselves."""
    opened = _brackets(prefix[-_BRACKET_WINDOW:], comment)[0]
    closers = {o: c for c, o in _PAIRS.items()}
    run = ""
    for ch in following:
        if ch not in _PAIRS:
            break
        run += ch
    after_kept = "".join(closers[o] for o in reversed(opened[: len(opened) - kept]))
    after_drop = "".join(closers[o] for o in reversed(opened))
    return after_kept.startswith(run) and not after_drop.startswith(run)


def drop_suffix_overlap(
    completion: str, suffix: str, comment: str = "#", prefix: str | None = None
) -> str:
    """Remove what the model repeated from the start of the suffix.

    (a) The longest tail of the completion that equals a head of the suffix, when that tail is
    a closing bracket, quote or punctuation mark, or holds at least two non-space characters.
    (b) Then, from the first completion line equal (stripped) to the suffix's first non-blank
    line on: the model has run into the code after the cursor. A line of closing brackets only
    counts when its indentation matches too. An overlap of whitespace alone is never cut.
    """
    text = _drop_repeated_line(_drop_repeated_tail(completion, suffix, comment), suffix)
    return drop_closed_brackets(text, suffix, comment, prefix)


def trim_trailing_blank(completion: str) -> str:
    """Strip all trailing whitespace and blank lines: the suffix supplies its own line break."""
    return completion.rstrip()


def _line_ending(text: str) -> str:
    crlf = text.count("\r\n")
    total = text.count("\n") + text.count("\r") - crlf
    return "\r\n" if 2 * crlf > total else "\n"


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _cursor_line_tail(suffix: str) -> str:
    """The cursor line's text after the cursor."""
    return _lf(suffix[:_WINDOW]).split("\n", 1)[0]


def _trim(completion: str, suffix: str) -> str:
    if suffix[:1].strip():
        # Text follows on the cursor line (so this is a one-line fill): a trailing space
        # separates the fill from it.
        return completion
    return trim_trailing_blank(completion)


def _cursor_line_head(prefix: str) -> str:
    """The cursor line's text before the cursor."""
    return _lf(prefix[-_INDENT_WINDOW:]).rsplit("\n", 1)[-1]


def _no_doubled_space(text: str, prefix: str) -> str:
    cursor_line = _cursor_line_head(prefix)
    if cursor_line.strip() and cursor_line[-1:] in (" ", "\t"):
        return text.lstrip(" \t") if not text.startswith(("\n", "\r")) else text
    return text


def _model_indent(completion: str, prefix: str) -> Indent:
    return detect_indent(_cursor_line_head(prefix) + completion)


def postprocess(
    completion: str,
    prefix: str,
    suffix: str,
    model_indent: Indent | None = None,
    block_indent: str | None = None,
    *,
    one_line: bool = False,
    indent: Indent | None = None,
    comment: str = "#",
) -> str | None:
    """The completion as the editor should insert it at the cursor, or None for nothing.

    `model_indent` is the indentation unit of the model's output; by default it is read from
    the cursor line's text before the cursor followed by the completion. The document's unit
    and line ending are read from the text around the cursor (_INDENT_WINDOW and _WINDOW
    characters either side); a document without indented lines there keeps the model's unit.

    `block_indent` makes it a fill of whole lines (the editing commands): no mid-line rule, all
    trailing whitespace goes, and a non-empty `block_indent` is the first line's indentation.
    `one_line` keeps the first line only. `indent`, the editor's formatting options for the
    document, is its unit when given (else detected). `comment` is the language's line comment
    mark ("" for none), which the bracket steps read brackets with, as the stop rules do.
    """
    text = cut_repeats(_lf(completion))
    block = block_indent is not None
    if one_line or (not block and _cursor_line_tail(suffix).strip()):
        text = text.split("\n", 1)[0]
    source = _model_indent(text, prefix) if model_indent is None else model_indent
    if indent is None:
        nearby = _lf(prefix[-_INDENT_WINDOW:] + suffix[:_INDENT_WINDOW])
        indent = detect_indent(nearby, default=source)
    text = reindent(text, source, indent)
    lf_suffix = _lf(suffix)
    text = drop_suffix_overlap(text, lf_suffix, comment, _lf(prefix))
    text = trim_trailing_blank(text) if block else _trim(text, lf_suffix)
    text = _no_doubled_space(text, prefix)
    if not text.strip():
        return None
    if block_indent:
        text = block_indent + text.lstrip()  # a body starts at its first statement
    eol = _line_ending(prefix[-_WINDOW:] + suffix[:_WINDOW])
    return text if eol == "\n" else text.replace("\n", eol)
