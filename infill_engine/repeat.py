'''Repetition loops: a short run of text written over and over (`path.path.path.`), the way a
model that has lost the thread fills its span. One rule, two users: the stop rule (stop.py) ends
a row once a loop is certain instead of running out its span, and the finishing steps
(finish/postprocess.py) cut a loop out of what the editor would show.

A loop is a unit of at most `MAX_PERIOD` characters written `MIN_COPIES` times or more in a
row, `MIN_LENGTH` characters at least, whose unit holds a letter, digit or underscore, or is a
line of code (a `"""` line over and over). Within a line, units of punctuation or whitespace
alone (`)))`, `# ======`, indentation) are never loops: rulers and the closers of nested calls
repeat in real code. The same unit over fewer copies or characters is not certain enough to
cut: `0, 0, 0` is data, `.path.path.path.path.path` is not.

A stutter (`find_stutter`) is the short form the length rule lets through: a unit of 2 to
`STUTTER_PERIOD` characters, holding a letter and a mark (a character neither word nor space
nor line break), written `STUTTER_COPIES` times or more in a row (`wo.g.g.g.g.g.g.g.g.g..`, 18
characters of `.g`). Its unit is no repeat of a shorter one, so `0xFFFFFFFF` and `----` are no
stutter; `ha ha ha` is none, `.g` needs six copies. The finishing steps cut both (`repeats`,
`cut_repeats`), in every language, plain text included: nothing shown repeats itself. The stop
rule reads loops only (a row is not ended on a stutter: the finish cuts it).
'''

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = re.compile(r"\w")

MAX_PERIOD = 40  # characters in the repeated unit: a short token run, or one short line
MIN_COPIES = 4  # the unit and three repeats of it
MIN_LENGTH = 24  # characters in the whole run
STUTTER_PERIOD = 4  # characters in a stutter's unit at most
STUTTER_COPIES = 6  # copies of it in a row at least
_STUTTER = re.compile(rf"([^\n]{{2,{STUTTER_PERIOD}}}?)\1{{{STUTTER_COPIES - 1},}}")
_LETTER = re.compile(r"[^\W\d_]")
_MARK = re.compile(r"[^\w\s]")


@dataclass(frozen=True)
class Loop:
    """A repetition loop in a text: [start, end) holds `copies` copies of `unit`."""

    start: int
    end: int
    unit: str

    @property
    def copies(self) -> int:
        return (self.end - self.start) // len(self.unit)

    @property
    def of_lines(self) -> bool:
        """Lines repeated (`pass\\n` over and over) rather than a run within a line."""
        return "\n" in self.unit


def find_loop(text: str) -> Loop | None:
    """The first repetition loop in text, at its shortest unit; None when there is none."""
    # UTF-32 gives every character 4 bytes, so the text XOR itself shifted by p characters
    # (big-integer XOR: C speed, where a scan per character would cost milliseconds) has 4 zero
    # bytes exactly where text[i] == text[i + p]; a loop is a long enough run of them.
    size = 4 * len(text)
    whole = int.from_bytes(text.encode("utf-32-le"), "little")  # character i at bits 32 i
    best: Loop | None = None
    for p in range(1, min(MAX_PERIOD, len(text) // MIN_COPIES) + 1):
        same = (whole ^ (whole >> (32 * p))).to_bytes(size, "little")[: size - 4 * p]
        loop = _first_run(text, same, p, best.start if best else len(text))
        if loop is not None:
            best = loop
    return best


def _first_run(text: str, same: bytes, p: int, before: int) -> Loop | None:
    """The first loop of period p starting before `before`, from the XOR bytes `same`."""
    need = max(MIN_COPIES * p, MIN_LENGTH) - p  # matching characters in a row
    zeros = b"\0" * (4 * need)
    at = same.find(zeros)
    while 0 <= at < 4 * before:
        start = -(-at // 4)  # a character's 4 bytes begin at a multiple of 4
        rest = same[4 * start :]
        run = (len(rest) - len(rest.lstrip(b"\0"))) // 4  # matching characters from start
        if run >= need and start < before:
            unit = text[start : start + p]
            if _WORD.search(unit) or ("\n" in unit and unit.strip()):
                return Loop(start, start + run + p, unit)
        at = same.find(zeros, 4 * (start + max(run, 1)))
    return None


def find_stutter(text: str) -> Loop | None:
    """The first stutter in text (see the module's docstring); None when there is none."""
    at = 0
    while (m := _STUTTER.search(text, at)) is not None:
        unit = m.group(1)
        if _LETTER.search(unit) and _MARK.search(unit) and not _periodic(unit):
            return Loop(m.start(), m.end(), unit)
        at = m.start() + 1
    return None


def _periodic(unit: str) -> bool:
    """Whether unit is a shorter unit written over (`FF`, `abab`)."""
    return unit in (unit + unit)[1:-1]


def repeats(text: str) -> Loop | None:
    """The first loop or stutter in text: what the finishing steps cut, and what nothing shown
    holds."""
    found = [x for x in (find_loop(text), find_stutter(text)) if x is not None]
    return min(found, key=lambda x: x.start) if found else None


def cut_loop(text: str) -> str:
    """Text up to its first loop: a loop within a line goes whole (`return os.path.path.path`
    is `return os`), and lines repeated over and over are kept once, through the first copy's
    last line break. Text without a loop is unchanged."""
    return _cut(text, find_loop(text))


def cut_repeats(text: str) -> str:
    """Text up to its first loop or stutter, cut as cut_loop cuts (a stutter goes whole)."""
    return _cut(text, repeats(text))


def _cut(text: str, loop: Loop | None) -> str:
    if loop is None:
        return text
    if loop.of_lines:
        return text[: loop.start + loop.unit.rindex("\n") + 1]
    return text[: loop.start]
