"""The workspace index's handlers: its build when the server starts (on a daemon thread, with
work-done progress that ends by saying what was left out), the editor asked to watch the indexed
kinds of file, and the changes it reports. The index itself is infill_engine/workspace/index.py;
saves update it in server.did_save."""

from __future__ import annotations

import asyncio

from lsprotocol import types as lsp

from infill_engine.workspace.index import SOURCE_SUFFIXES, WorkspaceIndex, uri_path

from ..engines.daemon import on_daemon_thread
from ..workspace.crossfile import roots_of
from .session import DllmServer

CONFIG_WAIT_S = 2.0  # for the editor's files.exclude: the index starts without it after that


async def index_workspace(ls: DllmServer) -> None:
    """Index the workspace folders for drafts on a thread, with work-done progress."""
    folders = [p for uri in roots_of(ls.workspace) if (p := uri_path(uri)) is not None]
    if not folders:
        return
    d = ls.options.drafts
    exclude = d.exclude + await _files_exclude(ls)
    index = WorkspaceIndex(d.max_files, d.max_file_bytes, d.max_bytes, d.max_seconds, exclude)
    token = await ls.progress_token("dllm-index", "dLLM: indexing the workspace")
    loop = asyncio.get_running_loop()

    def report(n: int) -> None:
        if token is not None:
            done = lsp.WorkDoneProgressReport(message=f"{n} files")
            loop.call_soon_threadsafe(ls.work_done_progress.report, token, done)

    ended = "stopped"
    try:
        await on_daemon_thread(index.build, folders, report, ls.closing, name="dllm-index")
        ended = index.summary()
    finally:
        if token is not None:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=ended))
    if not index.ready:
        return
    ls.completer.workspace = index
    ls.log(f"workspace index: {ended} in {index.build_s:.1f} s")
    await _watch_files(ls)


async def _files_exclude(ls: DllmServer) -> tuple[str, ...]:
    """The editor's `files.exclude` patterns (VS Code answers workspace/configuration with its
    settings; an editor that has none answers null)."""
    ws = ls.client_capabilities.workspace
    if ws is None or not ws.configuration:
        return ()
    params = lsp.ConfigurationParams([lsp.ConfigurationItem(section="files.exclude")])
    try:
        got = await asyncio.wait_for(ls.workspace_configuration_async(params), CONFIG_WAIT_S)
    except Exception as e:  # no answer, or a refusal: the index goes on without them
        ls.log(f"no files.exclude from the editor: {type(e).__name__}")
        return ()
    found = got[0] if isinstance(got, list) and got else None
    if not isinstance(found, dict):
        return ()
    return tuple(k for k, v in found.items() if v is True and isinstance(k, str) and k)[:1000]


async def _watch_files(ls: DllmServer) -> None:
    """Ask the editor for changes to the indexed kinds of file, where it can watch them."""
    ws = ls.client_capabilities.workspace
    watched = ws.did_change_watched_files if ws is not None else None
    if watched is None or not watched.dynamic_registration:
        return
    glob = "**/*.{" + ",".join(sorted(s.lstrip(".") for s in SOURCE_SUFFIXES)) + "}"
    options = lsp.DidChangeWatchedFilesRegistrationOptions([lsp.FileSystemWatcher(glob)])
    method = lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES
    registration = lsp.Registration(id="dllm-index", method=method, register_options=options)
    try:
        await ls.client_register_capability_async(lsp.RegistrationParams([registration]))
    except Exception as e:  # the editor refused: saves still update the index
        ls.log(f"no file watching for the workspace index: {e}")


def did_change_watched_files(ls: DllmServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    index = ls.completer.workspace
    if index is None:
        return
    for change in params.changes:
        path = uri_path(change.uri)
        if path is None:
            continue
        if change.type == lsp.FileChangeType.Deleted:
            index.remove(path)
        else:
            index.update(path)
