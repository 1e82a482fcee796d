"""The workspace of a file named on the command line: which folder it is, and reading it.

`dllm-infill fill` drafts from the workspace as the language server does: the same index
(index.py), built by the same rules (files.py), on the caller's thread since a command has
nothing else to do meanwhile. The workspace is the repository the file is in (the nearest
folder above it that holds `.git`), else the file's own folder.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from infill_engine.drafts import Draft

from .index import WorkspaceIndex


def root_of(path: Path) -> Path:
    """The nearest folder above `path` holding `.git` (a folder, or a worktree's file), else
    the file's own folder."""
    path = Path(os.path.realpath(path))
    for folder in path.parents:
        if (folder / ".git").exists():
            return folder
    return path.parent


def read(root: Path) -> WorkspaceIndex:
    """The index of the workspace under `root`, built now, with the language server's budget
    (the index's defaults: drafts.maxFiles and the rest in docs/editors.md)."""
    index = WorkspaceIndex()
    index.build([root])
    return index


def drafts_for(index: WorkspaceIndex, path: Path, text: str, offset: int) -> list[Draft]:
    """The workspace's drafts for the cursor at `offset` of `text`, the buffer of `path` (its
    copy on disk is never drafted from), as the language server asks for them."""
    return index.drafts(Path(os.path.realpath(path)).as_uri(), text, offset)


def relative(draft: Draft, root: Path) -> Draft:
    """The draft with a workspace file's `where` (path:line) relative to `root`."""
    path, sep, line = draft.where.rpartition(":")
    if draft.source != "workspace" or not sep:
        return draft
    try:
        rel = Path(path).relative_to(Path(os.path.realpath(root)))
    except ValueError:
        return draft
    return replace(draft, where=f"{rel.as_posix()}:{line}")
