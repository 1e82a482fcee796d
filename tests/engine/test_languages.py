"""Which languages a model knows (infill_engine/languages.py): read from its card, the builtin
model's saying Python, a setting over both, every language where nothing says."""

from __future__ import annotations

from pathlib import Path

import pytest

from infill_engine import languages
from infill_engine.languages import card_languages, knows, model_languages, normalise


def _card(folder: Path, front: str, body: str = "# A model\n") -> Path:
    (folder / "README.md").write_text(f"---\n{front}---\n\n{body}", encoding="utf-8")
    return folder


def test_the_builtin_model_knows_python_alone() -> None:
    assert model_languages("builtin") == {"python"}
    assert knows(model_languages("builtin"), "python")
    assert not knows(model_languages("builtin"), "go")


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("programming_language:\n  - Python\n  - Go\n", {"python", "go"}),
        ("language:\n  - en\n  - code\n  - rust\n", {"rust"}),  # natural languages are not code
        (
            "tags: [javascript, typescript, text-generation]\n",
            {"javascript", "javascriptreact", "typescript", "typescriptreact"},
        ),
        ("programming_languages: c++\n", {"cpp"}),
        ("language: [en, zh]\nlicense: mit\n", None),  # no language of code: every language
        ("tags: [: not yaml\n", None),
        ("- a list, not a mapping\n", None),
    ],
)
def test_a_card_says_which_languages(tmp_path: Path, front: str, expected: set[str] | None) -> None:
    _card(tmp_path, front)
    assert card_languages(tmp_path) == (None if expected is None else frozenset(expected))


def test_no_card_or_no_front_matter_knows_every_language(tmp_path: Path) -> None:
    assert card_languages(tmp_path) is None
    (tmp_path / "README.md").write_text("# Model\nprogramming_language: python\n")
    assert card_languages(tmp_path) is None
    assert knows(None, "go") and knows(None, "plaintext")


def test_a_card_is_read_bounded(tmp_path: Path) -> None:
    """A card is read up to MAX_CARD_BYTES: front matter that never closes inside it says
    nothing (and a huge file is not read whole)."""
    huge = "tags:\n" + "  - python\n" * (languages.MAX_CARD_BYTES // 8)
    (tmp_path / "README.md").write_text(f"---\n{huge}---\n")
    assert card_languages(tmp_path) is None


def test_the_setting_wins_and_a_remote_engine_knows_every_language(tmp_path: Path) -> None:
    assert model_languages("builtin", ["Go", "TypeScript"]) == {
        "go", "typescript", "typescriptreact",
    }  # fmt: skip
    assert model_languages("builtin", []) == frozenset()  # a model whose fills are never shown
    assert model_languages("builtin", remote=True) is None
    folder = tmp_path / "m"
    folder.mkdir()
    _card(folder, "programming_language: [java]\n")
    assert model_languages(str(folder)) == {"java"}


def test_a_hub_name_is_never_fetched_for_its_card(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Hub name not in the cache knows every language; nothing is downloaded for it (the
    endpoint is a closed port)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert model_languages("no-such-org/no-such-model") is None


def test_normalise_keeps_languages_of_code_only() -> None:
    assert normalise(["JS", "golang", "en", "Markdown", "c"]) == {
        "javascript", "javascriptreact", "go", "c",
    }  # fmt: skip
