"""The converter the server structures LSP types with is the protocol's public `converter`, the one
pygls was built with; no module of the language server reaches pygls's private `_converter`."""

from __future__ import annotations

import ast
from pathlib import Path

from cattrs import Converter
from lsprotocol import types as lsp

import lsp_server
from lsp_server.protocol.session import DllmServer


def test_the_protocol_names_the_converter_pygls_was_built_with() -> None:
    ls = DllmServer()
    assert isinstance(ls.protocol.converter, Converter)
    selection = lsp.Range(start=lsp.Position(1, 2), end=lsp.Position(3, 0))
    raw = ls.protocol.converter.unstructure(selection)  # a code action's argument, as sent
    assert raw == {"start": {"line": 1, "character": 2}, "end": {"line": 3, "character": 0}}
    assert ls.protocol.converter.structure(raw, lsp.Range) == selection  # as a command reads it


def test_no_module_reads_the_private_converter() -> None:
    root = Path(lsp_server.__file__).parent
    found = [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr == "_converter"
    ]
    assert found == []
