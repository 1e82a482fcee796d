"""What a document's imports bind and what names its code uses: the two things import drafts
read (lines.Cursor.binds, drafts/postings.py's keys). Python's import syntax, read only in
Python (`is_python`: its callers ask it of a document's languageId or a file's path), so that
no line of another language is taken for an import."""

from __future__ import annotations

import re

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
