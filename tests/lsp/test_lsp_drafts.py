"""Drafts end to end: the real server over stdio, the builtin model, a workspace folder on disk.

The server indexes the folder (honouring .gitignore), and a hole in an open document whose
shape another file has is offered that file's line: first for an invoked request, and for an
automatic one only over the gate, since the builtin model's own fills are not shown unasked.
`drafts.enabled: false` gives the model's fills alone."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsp_client import change_doc, inline, item_text, open_doc, start, status
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

PATTERN = (
    "def load_{0}(db):\n"
    "    rows = db.query('{0}')\n"
    "    result = [dict(r) for r in rows]\n"
    "    return result\n"
)
HOLE = "def load_groups(db):\n    rows = db.query('groups')\n    \n    return result\n"
LINE = "result = [dict(r) for r in rows]"
SETTINGS = {
    "decode": {"span": 8, "maxSpan": 8},
    "context": {"crossFile": False},
    "stats": {"enabled": True},
}


def _workspace(root: Path) -> Path:
    (root / "pkg").mkdir()
    (root / "pkg" / "users.py").write_text(PATTERN.format("users"))
    (root / ".gitignore").write_text("ignored/\n")
    (root / "ignored").mkdir()
    (root / "ignored" / "x.py").write_text(PATTERN.format("x"))
    groups = root / "pkg" / "groups.py"
    groups.write_text(HOLE)
    return groups


async def _indexed(client: LanguageClient) -> dict:
    for _ in range(200):
        ws = (await status(client))["drafts"]["workspace"]
        if ws and ws["ready"]:
            return ws
        await asyncio.sleep(0.05)
    raise TimeoutError("the workspace index was not built")


async def test_a_line_from_another_file_is_offered_and_gated(
    client: LanguageClient, tmp_path: Path
) -> None:
    groups = _workspace(tmp_path)
    settings = {**SETTINGS, "drafts": {"trustModel": None}}
    await start(client, settings=settings, folders=[tmp_path])
    ws = await _indexed(client)
    assert ws["files"] == 2 and ws["ready"]  # users.py, groups.py; not ignored/x.py
    uri = groups.as_uri()
    open_doc(client, uri, HOLE)
    # automatic (first: an invoked request's items are kept for typing ahead): this draft's
    # score is under the default gate, and the builtin model's own fills are not shown unasked
    assert await inline(client, uri, 2, 4, invoked=False) == []
    items = await inline(client, uri, 2, 4)
    assert items and item_text(items[0]) == LINE
    s = await status(client)
    assert s["drafts"]["shown"].get("workspace") == 1
    # accepting it counts for its source (the item's command names it)
    command = items[0].command
    assert command is not None and command.arguments[0]["source"] == "workspace"
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=command.command, arguments=command.arguments)
    )
    sources = (await status(client))["stats"]["sources"]
    assert sources["workspace"]["accepted"] == 1 and sources["workspace"]["items"] == 1


async def test_a_gate_of_zero_shows_it_as_the_user_types(
    client: LanguageClient, tmp_path: Path
) -> None:
    groups = _workspace(tmp_path)
    settings = {**SETTINGS, "drafts": {"trustModel": None, "gate": 0.0}}
    await start(client, settings=settings, folders=[tmp_path])
    await _indexed(client)
    open_doc(client, groups.as_uri(), HOLE)
    before = await status(client)
    items = await inline(client, groups.as_uri(), 2, 4, invoked=False)
    assert [item_text(i) for i in items] == [LINE]
    # the builtin model is not trusted: none of its fills could be shown unasked, so no model
    # pass was run for it (decide.Policy.model_shown), and the draft was decided on alone
    after = await status(client)
    assert after["model_calls"] == before["model_calls"]
    assert after["drafts"]["drafted_only"] == before["drafts"]["drafted_only"] + 1 == 1


async def test_a_line_that_reads_a_name_the_document_lacks_is_never_shown(
    client: LanguageClient, tmp_path: Path
) -> None:
    """users.py builds `User`s, which it imports; groups.py imports no `User`: the same line
    there raises NameError, so it is no item, asked or not (decide.unbound). Importing it makes
    the line an item again."""
    (tmp_path / "pkg").mkdir()
    typed = PATTERN.replace("[dict(r)", "[User(**r)")
    (tmp_path / "pkg" / "users.py").write_text(
        "from models import User\n\n\n" + typed.format("users")
    )
    groups = tmp_path / "pkg" / "groups.py"
    groups.write_text(HOLE)
    settings = {**SETTINGS, "drafts": {"trustModel": None, "gate": 0.0}}
    await start(client, settings=settings, folders=[tmp_path])
    await _indexed(client)
    uri = groups.as_uri()
    open_doc(client, uri, HOLE)
    line = "result = [User(**r) for r in rows]"
    assert await inline(client, uri, 2, 4, invoked=False) == []
    assert line not in [item_text(i) for i in await inline(client, uri, 2, 4)]
    change_doc(client, uri, 2, "from models import User\n\n\n" + HOLE)
    assert [item_text(i) for i in await inline(client, uri, 5, 4, invoked=False)] == [line]


async def test_a_parameter_just_renamed_is_the_name_a_copied_line_reads(
    client: LanguageClient, tmp_path: Path
) -> None:
    """users.py closes its `db`; in groups.py the user renamed the parameter `db` to `conn`.
    The line copied from users.py is offered as `conn.close()` (edits/renames.py). Opened as
    it now stands, with no edit made, the document says nothing of a rename: `db.close()` reads
    a name nothing binds (never shown) and nothing writes it `conn.close()`."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "users.py").write_text(
        "def load_users(db):\n    rows = db.query('users')\n    db.close()\n    return rows\n"
    )
    before = "def load_groups(db):\n    rows = db.query('groups')\n    \n    return rows\n"
    after = before.replace("db", "conn")
    (tmp_path / "pkg" / "groups.py").write_text(before)
    settings = {**SETTINGS, "drafts": {"trustModel": None, "gate": 0.0}}
    await start(client, settings=settings, folders=[tmp_path])
    await _indexed(client)
    uri = (tmp_path / "pkg" / "groups.py").as_uri()
    open_doc(client, uri, before)
    change_doc(client, uri, 2, before.replace("(db)", "(conn)"))  # at the binding
    change_doc(client, uri, 3, after)  # and carried to its reference
    # unasked (the drafts alone, no model pass), then asked (the model's fills too)
    assert [item_text(i) for i in await inline(client, uri, 2, 4, invoked=False)] == [
        "conn.close()"
    ]
    change_doc(client, uri, 4, after + "\n")  # no typed-ahead answer: a fresh request
    items = [item_text(i) for i in await inline(client, uri, 2, 4)]
    assert items[0] == "conn.close()" and not any("db" in t for t in items)
    fresh = (tmp_path / "pkg" / "fresh.py").as_uri()
    open_doc(client, fresh, after)
    items = [item_text(i) for i in await inline(client, fresh, 2, 4)]
    assert "conn.close()" not in items and "db.close()" not in items


async def test_drafts_off_gives_the_models_fills_alone(
    client: LanguageClient, tmp_path: Path
) -> None:
    groups = _workspace(tmp_path)
    await start(client, settings={**SETTINGS, "drafts": {"enabled": False}}, folders=[tmp_path])
    open_doc(client, groups.as_uri(), HOLE)
    items = await inline(client, groups.as_uri(), 2, 4)
    assert LINE not in [item_text(i) for i in items]
    s = await status(client)
    # no index built, nothing counted
    assert s["drafts"] == {"shown": {}, "drafted_only": 0, "workspace": None}


async def test_a_watched_file_change_reaches_the_index(
    client: LanguageClient, tmp_path: Path
) -> None:
    (tmp_path / "pkg").mkdir()
    groups = tmp_path / "pkg" / "groups.py"
    groups.write_text(HOLE)
    await start(client, settings={**SETTINGS, "drafts": {"trustModel": None}}, folders=[tmp_path])
    assert (await _indexed(client))["files"] == 1
    users = tmp_path / "pkg" / "users.py"
    users.write_text(PATTERN.format("users"))  # written behind the editor's back
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams([lsp.FileEvent(users.as_uri(), lsp.FileChangeType.Created)])
    )
    open_doc(client, groups.as_uri(), HOLE)
    items = await inline(client, groups.as_uri(), 2, 4)
    assert item_text(items[0]) == LINE
    assert (await status(client))["drafts"]["workspace"]["files"] == 2


BODY_PATTERN = (
    "def send_{0}(items):\n"
    "    for item in items:\n"
    "        if item.ready:\n"
    "            item.send()\n"
    "            print(item)\n"
    "    return items\n"
)
BODY_HOLE = "def send_groups(items):\n    for item in items:\n        \n    return items\n"
BODY = "if item.ready:\n            item.send()\n            print(item)"


async def test_an_empty_body_is_offered_whole_when_asked_for(
    client: LanguageClient, tmp_path: Path
) -> None:
    """The same opener in another file of the workspace, with a body under it: an invoked
    request at the empty body shows that body, re-indented, as one item of several lines (the
    builtin model untrusted, as by default: a draft goes before its fills); an automatic one
    never shows a body (docs/drafts.md), even with a gate of zero, over which the body (the
    best draft) is: it is the rule, not the gate, that keeps it out. The builtin model is not
    trusted, so nothing else is shown there: the automatic answer is empty, as it should be."""
    (tmp_path / "users.py").write_text(BODY_PATTERN.format("users"))
    groups = tmp_path / "groups.py"
    groups.write_text(BODY_HOLE)
    drafts = {"trustModel": None, "gate": 0.0}
    settings = {**SETTINGS, "decode": {"maxSpan": 32}, "drafts": drafts}
    await start(client, settings=settings, folders=[tmp_path])
    await _indexed(client)
    uri = groups.as_uri()
    open_doc(client, uri, BODY_HOLE)
    shown = await inline(client, uri, 2, 8, invoked=False)
    assert not any("\n" in item_text(i) for i in shown), [item_text(i) for i in shown]
    items = await inline(client, uri, 2, 8)
    assert items and item_text(items[0]) == BODY
    assert items[0].command is not None and items[0].command.arguments[0]["source"] == "workspace"


ROLES = (
    "def load_roles(db):\n"
    "    rows = db.query('roles')\n"
    "    result = [dict(**r) for r in rows]\n"
    "    return result\n"
    "\n\n"
)
BUFFER_LINE = "result = [dict(**r) for r in rows]"
STALE = "result = 'stale copy on disk'"


async def test_drafts_come_from_the_open_buffer_not_its_copy_on_disk(
    client: LanguageClient, tmp_path: Path
) -> None:
    """The editor's buffer has overtaken the file on disk: the disk copy of groups.py holds a
    line at the hole that the buffer no longer has (STALE), and the buffer gained, by a
    didChange after its didOpen, a function the disk copy lacks (BUFFER_LINE). An invoked
    request offers the buffer's line, as a draft from the document itself, and never the disk
    copy's line, although the index read that copy when it was built."""
    (tmp_path / "pkg").mkdir()
    groups = tmp_path / "pkg" / "groups.py"
    groups.write_text(HOLE.replace("    \n", f"    {STALE}\n"))  # what was saved, long ago
    # no other file: nothing in the workspace outranks the disk copy's line, which would be
    # shown if it were a candidate (an invoked request shows two drafts under the gate)
    settings = {**SETTINGS, "drafts": {"trustModel": None}, "completion": {"candidates": 8}}
    await start(client, settings=settings, folders=[tmp_path])
    assert (await _indexed(client))["files"] == 1  # groups.py's disk copy is in the index
    uri = groups.as_uri()
    open_doc(client, uri, HOLE)
    change_doc(client, uri, 2, ROLES + HOLE)  # the hole moves down by ROLES's six lines
    items = await inline(client, uri, 8, 4)
    texts = [item_text(i) for i in items]
    assert BUFFER_LINE in texts, texts
    assert not any("stale" in t for t in texts), texts
    ours = items[texts.index(BUFFER_LINE)].command
    assert ours is not None and ours.arguments[0]["source"] == "document"
