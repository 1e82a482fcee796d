"""The thin client's `v2/infill` request (engine_service.native_body) is the one hole on the wire:
the service's own parser (service/native.parse_native) reads it back into an equal hole, every
field the language server sets included, so a field one side adds and the other drops fails
here rather than as a quietly different fill."""

from __future__ import annotations

import json

import pytest

from infill_engine.drafts import Draft
from infill_engine.hole import Hole
from infill_engine.params import InfillParams
from infill_engine.service.native import parse_native
from infill_engine.service.wire import BadRequest
from lsp_server.engines.engine_service import native_body

TEXT = "import os\n\n\ndef walk(root):\n    for name in os.listdir(root):\n        \n"
CURSOR = TEXT.index("        \n") + 8


def test_a_hole_survives_the_wire_whole() -> None:
    hole = Hole(
        TEXT,
        CURSOR,
        None,
        "python",
        "invoked",
        3,
        200,
        40,
        InfillParams(span=12, max_span=48, threshold=0.8, seed=3, min_tokens=2),
        extra=(("pkg/util.py", "def helper():\n    return 1\n"),),
        extra_tokens=64,
        drafts=(Draft("print(name)", "workspace", 0.7, "pkg/util.py:2"),),
        drafting=False,
        renamed=(("root", "top"), ("$el", "node")),
    )
    body = json.loads(json.dumps(native_body(hole)))  # as an HTTP client sends it
    assert parse_native(body) == hole


@pytest.mark.parametrize(
    "renamed",
    [
        "root",
        [["root"]],
        [["root", "a b"]],
        [["root", ""]],
        [["root", 3]],
        [["root", "x" * 300]],
        [["a", "b"]] * 17,
    ],
)
def test_a_bad_renamed_field_is_a_clear_error(renamed: object) -> None:
    with pytest.raises(BadRequest, match="renamed"):
        parse_native({"text": TEXT, "offset": CURSOR, "renamed": renamed})


def test_a_selection_in_a_window_keeps_its_offsets_relative_to_the_window() -> None:
    start, end = TEXT.index("for"), TEXT.index(":\n        \n")
    hole = Hole(TEXT, start, end, "python", "command", params=InfillParams(), drafting=False)
    lo = TEXT.index("def")
    back = parse_native(native_body(hole, lo, len(TEXT)))
    assert back.text == TEXT[lo:] and back.text[back.offset : back.end] == TEXT[start:end]
    assert (back.priority, back.candidates, back.drafting) == ("command", 1, False)
