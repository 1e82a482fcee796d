"""Tree-sitter grammars as data: which wheel parses each LSP languageId, and the queries that
find its functions, blocks, empty bodies and statements.

This package owns `manifest.json` (languageId -> wheel module, language function, pinned
version, file extensions, block style, line comment) and the `<dir>/<name>.scm` query files.
Grammars come from the individual `tree-sitter-<lang>` wheels pinned in pyproject.toml, so
nothing is downloaded at run time. An unknown language, or one whose wheel is not importable,
gets None from every lookup, never an exception.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from functools import cache
from importlib import resources

from tree_sitter import Language, Node, Parser, Query, QueryCursor

__all__ = [
    "GrammarSpec",
    "captures",
    "language",
    "language_for_path",
    "language_ids",
    "parser",
    "query",
    "spec",
]

BLOCK_STYLES = ("indent", "brace")


@dataclass(frozen=True)
class GrammarSpec:
    """One manifest entry."""

    language_id: str  # the LSP languageId, e.g. "typescriptreact"
    module: str  # the wheel's import name, e.g. "tree_sitter_typescript"
    function: str  # the module's function returning the language, e.g. "language_tsx"
    version: str  # the wheel version pyproject.toml pins
    extensions: tuple[str, ...]  # lower case, with the dot: (".tsx",)
    block_style: str  # "indent" (the body is the indented lines) or "brace" (inside { })
    line_comment: str  # "#" or "//"
    queries: str  # the folder of grammars/ holding this grammar's .scm files

    def __post_init__(self) -> None:
        if self.block_style not in BLOCK_STYLES:
            raise ValueError(f"{self.language_id}: block_style must be one of {BLOCK_STYLES}")
        bad = [e for e in self.extensions if not e.startswith(".") or e != e.lower()]
        if bad:
            raise ValueError(f"{self.language_id}: extensions must be lower case with a dot: {bad}")
        if not self.queries.isidentifier():
            raise ValueError(f"{self.language_id}: queries must name a folder of grammars/")


@cache
def _specs() -> dict[str, GrammarSpec]:
    raw = json.loads(resources.files(__name__).joinpath("manifest.json").read_text("utf-8"))
    specs = {
        language_id: GrammarSpec(
            language_id=language_id,
            module=entry["module"],
            function=entry["function"],
            version=entry["version"],
            extensions=tuple(entry["extensions"]),
            block_style=entry["block_style"],
            line_comment=entry["line_comment"],
            queries=entry["queries"],
        )
        for language_id, entry in raw.items()
    }
    extensions = [e for s in specs.values() for e in s.extensions]
    if len(extensions) != len(set(extensions)):
        raise ValueError("manifest.json: an extension belongs to two languages")
    return specs


@cache
def _by_extension() -> dict[str, str]:
    return {e: s.language_id for s in _specs().values() for e in s.extensions}


def language_ids() -> tuple[str, ...]:
    """Every languageId in the manifest, in its order."""
    return tuple(_specs())


def spec(language_id: str) -> GrammarSpec | None:
    return _specs().get(language_id)


def language_for_path(path: str) -> str | None:
    """The languageId for a file name by its extension ("a/b.tsx" -> "typescriptreact")."""
    return _by_extension().get(os.path.splitext(path)[1].lower())


@cache
def language(language_id: str) -> Language | None:
    """The grammar from its wheel; None for an unknown language or a wheel that won't load."""
    found = spec(language_id)
    if found is None:
        return None
    try:
        module = importlib.import_module(found.module)
        return Language(getattr(module, found.function)())
    # AttributeError: no such function; ValueError: an ABI this tree-sitter cannot read
    except (ImportError, AttributeError, TypeError, ValueError):
        return None


@cache
def parser(language_id: str) -> Parser | None:
    grammar = language(language_id)
    return None if grammar is None else Parser(grammar)


@cache
def query(language_id: str, name: str) -> Query | None:
    """grammars/<dir>/<name>.scm compiled for the language; None when either is absent.

    A query that does not compile raises: the shipped queries are tested against the pinned
    grammars, so that is a bug, not a condition to hide.
    """
    found, grammar = spec(language_id), language(language_id)
    if found is None or grammar is None or not name.isidentifier():
        return None
    source = resources.files(__name__) / found.queries / f"{name}.scm"
    if not source.is_file():
        return None
    return Query(grammar, source.read_text("utf-8"))


def captures(language_id: str, name: str, node: Node) -> dict[str, list[Node]]:
    """Nodes under node captured by the query, by capture name, each node once and in document
    order; {} when there is no such query."""
    compiled = query(language_id, name)
    if compiled is None:
        return {}
    found = QueryCursor(compiled).captures(node)
    # A node matched by two patterns (an arrow function, named and unnamed) is listed once.
    return {
        key: sorted(dict.fromkeys(nodes), key=lambda n: (n.start_byte, -n.end_byte))
        for key, nodes in found.items()
    }


GUESS_CHARS = 16_000  # each side of the cursor that a guess reads


def guess(text: str, offset: int) -> str | None:
    """The language of a text that came with no name for it (llama.cpp's `/infill` sends none):
    the first in the manifest's order that parses the text around the cursor without an error,
    as it stands or with a name at the cursor (a hole mid-expression); None when none does
    (plain text, or code too broken to tell, which then gets no grammar's checks)."""
    start = text.rfind("\n", 0, max(0, offset - GUESS_CHARS)) + 1
    end = text.find("\n", min(len(text), offset + GUESS_CHARS))
    end = len(text) if end < 0 else end
    before, after = text[start:offset], text[offset:end]
    if not (before + after).strip():
        return None
    tries = [(before + after).encode("utf-8"), (before + "x" + after).encode("utf-8")]
    for language_id in language_ids():
        p = parser(language_id)
        if p is not None and any(not p.parse(t).root_node.has_error for t in tries):
            return language_id
    return None
