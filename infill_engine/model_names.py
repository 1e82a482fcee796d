"""Model names: which texts name a Hub model, what is refused before anything touches the network
or the disk, and how a message quotes a name.

This module owns the spelling of a name; hub.py owns what the Hub and the cache do with one.

- `ORG/NAME[@REVISION]` is a Hub name (`parse_name` -> `HubName`), ORG and NAME as the Hub
  spells repository ids; any other text (a path, "builtin") is not one.
- A text longer than MAX_MODEL characters is refused, and so is a revision that is not a
  branch, tag or commit name by git's rules (no leading `/`, no `..`, ...): huggingface_hub
  writes the commit of a revision to `refs/REVISION` under the cache. A `HubName` checks itself
  when built, so no path to the Hub or the cache takes an unchecked name.
- A message quotes a name with `quoted`: cut to QUOTED characters with its length said, so a
  name of any size stays one short line.
- `HubError` is the error of a name that cannot be resolved: raised here for its spelling, and
  by hub.py when the Hub or the cache refuses it.

Nothing here does I/O or imports beyond the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ORG/NAME as the Hub spells repository ids; an @REVISION after it is checked by revision_problem.
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
# A model name or path longer than this is refused (a path past it is no model directory anyone
# types); messages quote a name cut to QUOTED characters.
MAX_MODEL = 1024
MAX_REVISION = 255
QUOTED = 80
# What git's check-ref-format refuses in a branch or tag name, besides control characters.
_REF_FORBIDDEN = frozenset(" ~^:?*[\\")


class HubError(ValueError):
    """A name that cannot be resolved; the message says why and what to do."""


@dataclass(frozen=True)
class HubName:
    repo: str  # ORG/NAME
    revision: str | None  # None: the default branch

    def __post_init__(self) -> None:
        # every path to the Hub and the cache goes through a HubName: checked here, not trusted
        if _REPO.fullmatch(self.repo) is None or ".." in self.repo:
            raise HubError(f"model {quoted(self.repo)}: not a Hub name (ORG/NAME)")
        why = None if self.revision is None else revision_problem(self.revision)
        if why is not None:
            raise HubError(
                f"model {quoted(f'{self.repo}@{self.revision}')}: the revision "
                f"{quoted(str(self.revision))} is not a branch, tag or commit name ({why})"
            )

    def __str__(self) -> str:
        return self.repo + (f"@{self.revision}" if self.revision else "")

    def download_command(self) -> str:
        """What a user runs where the Hub can be reached."""
        rev = f" --revision {self.revision}" if self.revision else ""
        return f"hf download {self.repo}{rev}"


def parse_name(text: str) -> HubName | None:
    """`ORG/NAME[@REVISION]`, or None when `text` is not of that form (a path, "builtin").

    Refused with a HubError, before anything touches the network or the disk: a text longer
    than MAX_MODEL, and a revision that is not a branch, tag or commit name (revision_problem):
    huggingface_hub writes the commit of a revision to `refs/REVISION` in the cache, so a
    revision such as `/abs/path` or `../x` would write outside it."""
    if len(text) > MAX_MODEL:
        raise HubError(
            f"model {quoted(text)}: {len(text)} characters, more than the {MAX_MODEL} a model "
            "name or path may have"
        )
    repo, at, revision = text.partition("@")
    if _REPO.fullmatch(repo) is None or ".." in repo:
        return None
    return HubName(repo, revision if at else None)  # its revision checked there


def revision_problem(revision: str) -> str | None:
    """Why `revision` is no branch, tag or commit name, or None: git's check-ref-format rules,
    which also keep `refs/REVISION` a path inside the cache's `refs` folder."""
    if not revision:
        return "it is empty; write ORG/NAME alone for the default branch"
    if len(revision) > MAX_REVISION:
        return f"{len(revision)} characters, more than {MAX_REVISION}"
    bad = sorted({c for c in revision if c in _REF_FORBIDDEN or not c.isprintable()})
    if bad:
        return "it holds " + ", ".join(repr(c) for c in bad[:5])
    parts = revision.split("/")
    checks = [
        (revision.startswith("/"), "it starts with '/'"),
        (revision.endswith("/"), "it ends with '/'"),
        ("//" in revision, "it holds '//'"),
        (".." in revision, "it holds '..'"),
        ("@{" in revision or revision == "@", "it holds '@{' or is '@'"),
        (any(p.startswith(".") for p in parts), "a part of it starts with '.'"),
        (any(p.endswith(".lock") for p in parts), "a part of it ends with '.lock'"),
        (revision.endswith("."), "it ends with '.'"),
    ]
    return next((why for failed, why in checks if failed), None)


def quoted(text: str) -> str:
    """`text` as a message quotes it: its repr, cut to QUOTED characters with its length said,
    so that a name of any size stays one short line."""
    if len(text) <= QUOTED:
        return repr(text)
    return f"{text[:QUOTED]!r}... ({len(text)} characters)"
