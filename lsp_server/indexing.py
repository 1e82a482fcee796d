"""The workspace index's handlers: its build when the server starts (on a thread, with
work-done progress), the editor asked to watch the indexed kinds of file, and the changes it
reports. The index itself is workspace_index.py; saves update it in server.did_save."""

from __future__ import annotations

import asyncio
import time

from lsprotocol import types as lsp

from .crossfile import roots_of
from .session import DllmServer
from .workspace_index import SOURCE_SUFFIXES, WorkspaceIndex, uri_path


async def index_workspace(ls: DllmServer) -> None:
    """Index the workspace folders for drafts on a thread, with work-done progress."""
    folders = [p for uri in roots_of(ls.workspace) if (p := uri_path(uri)) is not None]
    if not folders:
        return
    d = ls.options.drafts
    index = WorkspaceIndex(d.max_files, d.max_file_bytes)
    token = await ls.progress_token("dllm-index", "dLLM: indexing the workspace")
    loop = asyncio.get_running_loop()

    def report(n: int) -> None:
        if token is not None:
            done = lsp.WorkDoneProgressReport(message=f"{n} files")
            loop.call_soon_threadsafe(ls.work_done_progress.report, token, done)

    t0 = time.perf_counter()
    try:
        n = await asyncio.to_thread(index.build, folders, report, ls.closing)
    finally:
        if token is not None:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message="indexed"))
    ls.completer.workspace = index
    ls.log(f"workspace index: {n} files in {time.perf_counter() - t0:.1f} s")
    await _watch_files(ls)


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
