"""One concept per class name: the names a review found on two concepts (a planner's view of the
document beside the language server's open document, a window pass's inputs beside the cache's
writer for one) now name one class each in the runtime packages."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("infill_engine", "lsp_server", "grammars")
ONE_CONCEPT = ("Document", "Window")  # a leading underscore does not make another name


def classes() -> dict[str, list[str]]:
    """Class name (leading underscores dropped) -> where each class of that name is defined."""
    found: dict[str, list[str]] = defaultdict(list)
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found[node.name.lstrip("_")].append(where)
    return found


def test_each_name_is_one_class() -> None:
    found = classes()
    assert {name: found[name] for name in ONE_CONCEPT if len(found[name]) > 1} == {}
