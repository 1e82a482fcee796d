"""Which programming languages a model knows, so that its fills are shown only there.

Drafts come from what the code already says and are shown in any language. A model's fills are
worth showing only in the languages it was trained on: the builtin model saw Python alone, and
its fills in Go are noise. A model says which languages it knows in its card, the README.md of
its directory (Hugging Face's model card), in the YAML front matter:

    ---
    programming_language: [python]      # or programming_languages; `language` and `tags`
    ---                                 # are read too, for the code languages they name

Natural languages there (`en`, `zh`) and other tags are not languages of code and are ignored.
A card that names no code language, a model with no card, and an engine elsewhere know every
language (`None`): it is its operator's choice, and a setting (`modelLanguages`, `fill
--model-languages`) says otherwise. The card is read as text, bounded; nothing in a model
directory is ever run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["ALIASES", "card_languages", "knows", "model_languages", "normalise"]

MAX_CARD_BYTES = 256 * 1024
KEYS = ("programming_language", "programming_languages", "language", "tags")

# What cards write, to the editors' languageIds it stands for.
ALIASES: dict[str, tuple[str, ...]] = {
    "python": ("python",),
    "py": ("python",),
    "javascript": ("javascript", "javascriptreact"),
    "js": ("javascript", "javascriptreact"),
    "typescript": ("typescript", "typescriptreact"),
    "ts": ("typescript", "typescriptreact"),
    "go": ("go",),
    "golang": ("go",),
    "rust": ("rust",),
    "java": ("java",),
    "c": ("c",),
    "c++": ("cpp",),
    "cpp": ("cpp",),
    "ruby": ("ruby",),
    "php": ("php",),
    "c#": ("csharp",),
    "csharp": ("csharp",),
    "kotlin": ("kotlin",),
    "swift": ("swift",),
    "scala": ("scala",),
    "lua": ("lua",),
    "shell": ("shellscript",),
    "bash": ("shellscript",),
    "sql": ("sql",),
    "html": ("html",),
    "css": ("css",),
}


def normalise(names: Iterable[str]) -> frozenset[str]:
    """The languageIds that `names` (card words or languageIds, any case) stand for; a name
    that is no language of code is dropped."""
    out: set[str] = set()
    for name in names:
        key = name.strip().lower()
        out.update(ALIASES.get(key, (key,) if key in _IDS else ()))
    return frozenset(out)


_IDS = frozenset(i for ids in ALIASES.values() for i in ids)


def card_languages(model_dir: Path) -> frozenset[str] | None:
    """The code languages a model directory's card names; None where it names none (or there
    is no card, or it cannot be read)."""
    card = model_dir / "README.md"
    try:
        with open(card, "rb") as f:
            head = f.read(MAX_CARD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    meta = _front_matter(head)
    names: list[str] = []
    for key in KEYS:
        value = meta.get(key)
        if isinstance(value, str):
            names.append(value)
        elif isinstance(value, list):
            names += [v for v in value if isinstance(v, str)]
    found = normalise(names)
    return found or None


def _front_matter(text: str) -> dict[str, Any]:
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    import yaml

    try:
        meta = yaml.safe_load(text[3:end])
    except yaml.YAMLError:
        return {}
    return meta if isinstance(meta, dict) else {}


def model_languages(
    model: str | os.PathLike[str], setting: Sequence[str] | None = None, remote: bool = False
) -> frozenset[str] | None:
    """The languages whose fills of `model` are shown: the setting when there is one, else
    what the model's card says (the builtin model's: Python), else every language (None). An
    engine elsewhere (`remote`) serves a model of its operator's choosing: every language.
    A Hub name is read from the cache only, never downloaded for this."""
    if setting is not None:
        return normalise(setting)
    if remote:
        return None
    return _from_card(str(model))


@lru_cache(maxsize=16)
def _from_card(model: str) -> frozenset[str] | None:
    """What the card of `model` says, read once per process (the service asks per request)."""
    from . import hub
    from .loader import ModelLoadError, locate

    try:
        where = locate(model)
    except ModelLoadError:
        return None
    if isinstance(where, Path):
        return card_languages(where)
    snapshot = hub.cached_card(where)
    return card_languages(snapshot) if snapshot is not None else None


def knows(languages: frozenset[str] | None, language_id: str) -> bool:
    """Whether a model knowing `languages` (None: every language) knows `language_id`."""
    return languages is None or language_id in languages
