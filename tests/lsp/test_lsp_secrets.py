"""Planted secrets end to end: the real server over stdio, the builtin model, a workspace on disk.

A hole whose shape another file of the workspace has is offered that file's line (drafts), and
with `drafts.gate: 0.0` any such line is shown. When the line holds a credential (a provider's
token, a literal password, an AWS key id) it is never shown, in Python or in JavaScript, and
`dllm/status` counts it under its rule (`secrets_filtered`); the same line with an ordinary
value is shown, so the drafts path is live. A credential elsewhere in the open buffer itself is
held back the same way.

The tokens are made at random here, never written out (tests/engine/test_secrets.py)."""

from __future__ import annotations

import asyncio
import random
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lsp_client import inline, item_text, open_doc, start, status
from planted import ALNUM, token
from pytest_lsp import LanguageClient

RNG = random.Random(20261205)


def _rand(n: int, alphabet: str = ALNUM) -> str:
    return token(RNG, n, alphabet)


GITHUB = "ghp_" + _rand(36)
PASSWORD = _rand(14)
AWS = "AKIA" + _rand(16, string.ascii_uppercase + string.digits)
SETTINGS = {
    "decode": {"span": 8, "maxSpan": 8},
    "context": {"crossFile": False},
    "languages": ["python", "javascript"],
    "drafts": {"trustModel": None, "gate": 0.0},
}


@dataclass(frozen=True)
class Language:
    """A function: `{name}` its name's tail, `{tag}` what makes the lines around the planted
    one (`{line}`, the line a draft copies) differ from kind to kind."""

    id: str
    suffix: str
    template: str
    indent: str
    lines: dict[str, str]  # kind -> the line that holds it; "control": an ordinary value


PYTHON = Language(
    "python",
    ".py",
    "def connect_{name}(settings):\n"
    "    session = open_{tag}_session(settings)\n"
    "    {line}\n"
    "    return {tag}_client(session)\n",
    "    ",
    {
        # names bound where the line lands (decide.unbound vetoes a line that reads others)
        "github_token": f'client = settings.Client(api_key="{GITHUB}")',
        "assigned_secret": f'password = "{PASSWORD}"',
        "aws_access_key": f'aws_key_id = "{AWS}"',
        "control": "client = settings.Client(api_key=settings.API_KEY)",
    },
)
JAVASCRIPT = Language(
    "javascript",
    ".js",
    "function connect_{name}(settings) {{\n"
    "  const session = open_{tag}_session(settings);\n"
    "  {line}\n"
    "  return {tag}_client(session);\n"
    "}}\n",
    "  ",
    {
        "github_token": f'const client = new Client({{ apiKey: "{GITHUB}" }});',
        "assigned_secret": f'const password = "{PASSWORD}";',
        "aws_access_key": f'const awsKeyId = "{AWS}";',
        "control": "const client = new Client({ apiKey: settings.apiKey });",
    },
)
TOKENS = (GITHUB, PASSWORD, AWS)


def _leaks(texts: list[str]) -> bool:
    """Whether any text holds any 8 characters running of a planted token."""
    return any(t[i : i + 8] in x for t in TOKENS for i in range(len(t) - 7) for x in texts)


def _hole_text(lang: Language, tag: str) -> str:
    """The function with its planted line left empty (the cursor: line 2, after the indent)."""
    return lang.template.format(name="groups", tag=tag, line="")


async def _indexed(client: LanguageClient) -> dict[str, Any]:
    for _ in range(200):
        ws = (await status(client))["drafts"]["workspace"]
        if ws and ws["ready"]:
            return dict(ws)
        await asyncio.sleep(0.05)
    raise TimeoutError("the workspace index was not built")


async def _filtered(client: LanguageClient) -> dict[str, int]:
    return dict((await status(client))["secrets_filtered"])


@pytest.mark.parametrize("lang", [PYTHON, JAVASCRIPT], ids=lambda lang: lang.id)
async def test_a_workspace_line_that_holds_a_secret_is_never_shown(
    client: LanguageClient, tmp_path: Path, lang: Language
) -> None:
    """One folder a kind: its file has the planted line, the open hole the same shape."""
    for kind, line in lang.lines.items():
        (tmp_path / kind).mkdir()
        (tmp_path / kind / f"users{lang.suffix}").write_text(
            lang.template.format(name="users", tag=kind, line=line)
        )
        (tmp_path / kind / f"groups{lang.suffix}").write_text(_hole_text(lang, kind))
    await start(client, settings=SETTINGS, folders=[tmp_path])
    assert (await _indexed(client))["files"] == 2 * len(lang.lines)
    assert await _filtered(client) == {}
    for kind, line in lang.lines.items():
        uri = (tmp_path / kind / f"groups{lang.suffix}").as_uri()
        open_doc(client, uri, _hole_text(lang, kind), lang.id)
        # automatic first (an invoked request's items are kept for typing ahead), then invoked:
        # the second may be answered from what the first found, counted once
        before = await _filtered(client)
        for invoked in (False, True):
            items = await inline(client, uri, 2, len(lang.indent), invoked=invoked)
            texts = [item_text(i) for i in items]
            if kind == "control":  # the same line with an ordinary value is offered
                assert line in texts, (invoked, texts)
            else:
                assert not _leaks(texts), (kind, texts)
        after = await _filtered(client)
        if kind == "control":
            assert after == before
        else:
            assert after.get(kind, 0) > before.get(kind, 0), (kind, before, after)


DOCUMENT = (
    "def connect_users(settings):\n"
    "    session = open_session(settings)\n"
    "    {line}\n"
    "    return client\n"
    "\n"
    "\n"
    "def connect_groups(settings):\n"
    "    session = open_session(settings)\n"
    "    \n"
    "    return client\n"
)


async def test_a_secret_elsewhere_in_the_open_document_is_never_shown(
    client: LanguageClient, tmp_path: Path
) -> None:
    """No workspace file has the line: the buffer's own other function does (a `document`
    draft), first with an ordinary value, then, in a second buffer, with a token."""
    await start(client, settings=SETTINGS, folders=[tmp_path])
    uri = (tmp_path / "app.py").as_uri()
    control = PYTHON.lines["control"]
    open_doc(client, uri, DOCUMENT.format(line=control))
    for invoked in (False, True):
        assert control in [item_text(i) for i in await inline(client, uri, 8, 4, invoked)]
    assert await _filtered(client) == {}
    secret = PYTHON.lines["github_token"]
    other = (tmp_path / "other.py").as_uri()
    open_doc(client, other, DOCUMENT.format(line=secret))
    for invoked in (False, True):
        texts = [item_text(i) for i in await inline(client, other, 8, 4, invoked)]
        assert not _leaks(texts), (invoked, texts)
    assert (await _filtered(client)).get("github_token", 0) > 0
