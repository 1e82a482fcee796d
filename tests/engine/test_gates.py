"""The drafts' gate in every language (drafts/gate.py): a model of its own for each language of
the grammars, OTHER for the rest, and never a comment or a rule of punctuation unasked."""

from __future__ import annotations

import json
import math

import pytest

from infill_engine.drafts import Draft
from infill_engine.drafts.gate import (
    FEATURES,
    GATE,
    GATES,
    GATES_FILE,
    OTHER,
    decoration,
    gate_for,
    passes,
)
from infill_engine.drafts.rank import choose
from infill_engine.drafts.weights import score

LANGUAGES = ("python", "go", "rust", "typescript", "javascript", "java", "c", "cpp")


def test_each_language_of_the_grammars_has_a_gate_of_its_own() -> None:
    raw = json.loads(GATES_FILE.read_text())
    assert set(LANGUAGES) | {"other"} <= set(raw)
    for name, gate in GATES.items():
        assert len(gate.mean) == len(gate.scale) == len(gate.coef) == len(FEATURES), name
        assert 0.0 < gate.threshold < 1.0, name
    assert GATE == GATES["python"].threshold == 0.3  # Python's gate stays where it was
    assert gate_for("typescriptreact") is GATES["typescript"]
    assert gate_for("javascriptreact") is GATES["javascript"]
    assert gate_for("ruby") is OTHER is GATES["other"]
    assert len({g.coef for g in GATES.values()}) == len(GATES)  # each fitted on its own code


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("// =============================================", "go", True),
        ("/**", "typescript", True),
        ("* @param name the name", "java", True),
        ("# the rows, in order", "python", True),
        ("#include <stdio.h>", "c", False),  # a directive, not a comment
        ("}", "rust", False),  # closing a block is worth showing
        ("});", "javascript", False),
        ("*/", "c", True),
        ("** a note", "cpp", True),
        ("*p = x;", "c", False),  # a dereference, not a comment's line
        ("**pp = q;", "cpp", False),
        ("*(int *)at = 0;", "c", False),
        ("*[Symbol.iterator]() {", "javascript", False),  # a generator method
        ("return nil", "go", False),
        ("----------", "plaintext", True),
        ("Deploy steps", "plaintext", False),
        ("# Heading", "markdown", False),  # no grammar: its comments are not known
    ],
)
def test_decoration(text: str, language: str, expected: bool) -> None:
    assert decoration(text, language) is expected


# The line features of an occurrence with the cursor's lines above and below, the same
# indentation step, found six times, every name known (weights.Weights' order, bias last).
SURE = (1.0, 1.0, 1.0, 0.8, 1.0, math.log(6), 1.0, 1.0, 0.0, 0.0, 1.0)


def test_a_sure_draft_passes_unless_it_is_decoration() -> None:
    sure = [Draft("return nil", "document", score(SURE), "", SURE, votes=6)]
    assert passes(sure, "", "go", None)
    rule = [Draft("// ==================", "document", 9.0, votes=6)]
    assert not passes(rule, "", "go", None)
    assert not passes(rule, "", "go", 0.0)  # whatever the setting
    assert choose([], rule, automatic=True, gate=None, trust_model=False, language_id="go") == []
    asked = choose([], rule, automatic=False, gate=None, trust_model=False, language_id="go")
    assert [c.text for c in asked] == ["// =================="]  # asked for, it is offered


def test_the_threshold_is_the_languages_own_unless_set() -> None:
    found = [Draft("err := run()", "document", 4.0, votes=2)]
    for language in LANGUAGES:
        confidence = gate_for(language).confidence(found, "")
        assert passes(found, "", language, confidence)
        assert not passes(found, "", language, min(1.0, confidence + 1e-6))
        assert passes(found, "", language, None) is (confidence >= gate_for(language).threshold)
