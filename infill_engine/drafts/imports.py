"""What a document's imports bind and what names its code uses: the two things import drafts
read (lines.Cursor.binds, drafts/postings.py's keys, and `adds_nothing`, which the decision
reads before an import is shown). Python's import syntax, read only in Python (`is_python`: its
callers ask it of a document's languageId or a file's path), so that no line of another
language is taken for an import."""

from __future__ import annotations

import re
from collections.abc import Sequence, Set

from .idents import IDENT

_IMPORT = re.compile(r"(?:from\s+\.*[\w.]*\s+)?import\s+\(?([^()#]+?)\)?\s*$")


# Strings and comments, whichever starts first (so a `#` in a string and a quote in a comment
# are what they are).
_NOT_CODE = re.compile(
    r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#[^\n]*'
)


PYTHON_SUFFIXES = (".py", ".pyi")


def is_python(path: str = "", language_id: str = "") -> bool:
    """Whether a text is Python, by its languageId or its file's path (or URI)."""
    return language_id == "python" or path.endswith(PYTHON_SUFFIXES)


def code_names(text: str) -> frozenset[str]:
    """The names `text` uses as code: its identifiers outside comments and strings (a
    docstring's `>>> import toolz` uses nothing)."""
    return frozenset(IDENT.findall(_NOT_CODE.sub(" ", text)))


def imported_names(stripped: str) -> frozenset[str]:
    """The names a one-line import binds (`import a.b`: a; `import a as b`: b; `from m import
    x, y as z`: x and z); none for any other line, or a star import."""
    if not stripped.startswith(("import ", "from ")) or not (m := _IMPORT.match(stripped)):
        return frozenset()
    names = set()
    for part in m.group(1).split(","):
        words = part.split()
        if not words or words[0] == "*":
            continue
        name = words[-1] if len(words) == 3 and words[1] == "as" else words[0]
        names.add(name if stripped.startswith("from ") or "as" in words else name.split(".")[0])
    return frozenset(n for n in names if n.isidentifier())


def imports_and_uses(
    lines: Sequence[str], top: bool = False
) -> tuple[frozenset[str], frozenset[str]]:
    """(the names the imports among `lines` bind, only those at no indentation where `top`;
    the names the other lines use as code)."""
    imported: set[str] = set()
    code = []
    for line in lines:
        if names := imported_names(line.strip()):
            if not top or not line[:1].isspace():
                imported |= names
        else:
            code.append(line)
    return frozenset(imported), code_names("\n".join(code))


def adds_nothing(line: str, imported: Set[str], used: Set[str], asked: bool) -> bool:
    """Whether the one-line import `line` would add nothing to a document whose module-level
    imports bind `imported` and whose code uses `used` (imports_and_uses(..., top=True), the
    cursor's own line left out): a name it binds is bound by a module-level import already (a
    second import of it is redundant, wherever it stands), or, unasked, the code uses not all
    of them (an import is written for a name the code reads). A `__future__` import binds
    nothing the code reads and is never idle; a line that is no import neither.

    On the standard library's calibration holes, 15 first drafts so were shown unasked, 2 of
    them right; on held-out Python, 6 and 1 (docs/drafts.md)."""
    names = imported_names(s := line.strip())
    if not names or s.startswith("from __future__"):
        return False
    return bool(names & imported) or (not asked and not names <= used)
