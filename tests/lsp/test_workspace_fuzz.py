"""Hostile workspaces (infill_engine/workspace/files.py's rules), at two levels.

In-process, on `WorkspaceIndex`: each hostile thing in a folder of its own beside one ordinary
file, `ok.py`. The build ends within BUILD_S, `ok.py` is indexed and still gives its draft, no
path outside the root is indexed, no marker of a file outside the root or a hidden one reaches a
draft, `status()["skipped_by"]` names the reason (REASONS), and `update()` on the hostile path is
False without blocking. A control case shows the markers would reach a draft if their files were
read.

End to end, the real server over stdio with the builtin model: all of them in one workspace; the
index gets ready, its progress and `dllm/status` say what was left out, an invoked completion
still offers the ordinary file's line and neither marker, the server's memory stays bounded, and
`shutdown` + `exit` end the process within SHUTDOWN_S, also while a build is still running.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import pytest
from lsp_client import SERVER, StdioPeer, init_params
from lsprotocol import converters
from procfs import rss_mib

from infill_engine.workspace import files as workspace_files
from infill_engine.workspace.files import MAX_IGNORE_PATTERNS, REASONS, read_regular
from infill_engine.workspace.index import WorkspaceIndex

T = TypeVar("T")
BUILD_S = 5.0  # a build of a folder of a few files: far under it, unless something blocks
SHUTDOWN_S = 2.0  # from `shutdown` sent to the process gone
RSS_GROWTH_MIB = 200  # the server's peak over its size once the model is loaded
ROOT_USER = os.geteuid() == 0  # chmod 000 stops no read of root's

PATTERN = "def load_{0}(db):\n    rows = db.query('{0}')\n    result = [dict(r) for r in rows]\n"
HOLE = "def load_groups(db):\n    rows = db.query('groups')\n    \n    return result\n"
CURSOR = HOLE.index("    \n") + 4
LINE = "result = [dict(r) for r in rows]"
OUTSIDE_MARK = "sk-outside-555"
HIDDEN_MARK = "sk-hiddenfile-333"
MARKS = (OUTSIDE_MARK, HIDDEN_MARK)


def marked(mark: str) -> str:
    """A file shaped like PATTERN whose line at the hole carries `mark`: a draft if it is read."""
    return f"def load_secret(db):\n    rows = db.query('secret')\n    result = '{mark}'\n"


def bounded(fn: Callable[..., T], *args: Any, timeout: float = BUILD_S) -> tuple[T, float]:
    """`fn(*args)` on a daemon thread: its result and seconds, or a failure when it is still
    running after `timeout` (blocked on a FIFO, say; the thread is left behind)."""
    out: list[Any] = []
    t0 = time.monotonic()
    thread = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        pytest.fail(f"{getattr(fn, '__name__', fn)} still running after {timeout} s")
    assert out, "it raised (see the thread's traceback)"
    return out[0], time.monotonic() - t0


# -- the hostile things -------------------------------------------------------------------------
def fifo(path: Path) -> None:
    os.mkfifo(path)


def unix_socket(path: Path) -> None:
    """A socket file (bound from inside its folder: AF_UNIX paths are at most 107 bytes)."""
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.bind(path.name)  # the file stays after the socket closes
    finally:
        os.chdir(cwd)


def gitignore_patterns(n: int) -> str:
    return "".join(f"generated_{i}.py\n" for i in range(n))


def link(path: Path, target: str | Path) -> None:
    path.symlink_to(target)


@contextlib.contextmanager
def growing(path: Path) -> Iterator[None]:
    """`path` appended to, about 4 KB a millisecond, while the block runs."""
    stop = threading.Event()

    def append() -> None:
        with path.open("a") as f:
            while not stop.is_set():
                f.write("x = 1\n" * 700)
                f.flush()
                time.sleep(0.001)

    writer = threading.Thread(target=append, daemon=True)
    writer.start()
    try:
        yield
    finally:
        stop.set()
        writer.join(5)


@dataclass(frozen=True)
class Case:
    make: Callable[[Path, Path], None]  # (root, the folder outside it) -> None
    skipped: dict[str, int]  # status()["skipped_by"]
    hostile: tuple[str, ...] = ()  # paths under the root that update() must refuse
    files: int = 1  # files indexed: ok.py and those the case adds


def _sub(root: Path, gitignore: Callable[[Path], None]) -> None:
    """A folder `sub` whose .gitignore is hostile, with a source file: left out whole."""
    (root / "sub").mkdir()
    (root / "sub" / "x.py").write_text(PATTERN.format("sub"))
    gitignore(root / "sub" / ".gitignore")


def _negation(root: Path, outside: Path) -> None:
    (root / ".gitignore").write_text("*.gen.py\n!keep.gen.py\n")
    (root / "made.gen.py").write_text(PATTERN.format("made"))
    (root / "keep.gen.py").write_text(PATTERN.format("keep"))


def _double_star(root: Path, outside: Path) -> None:
    (root / ".gitignore").write_text("**/build/**\n**/secret_*.py\n")
    (root / "deep" / "build").mkdir(parents=True)
    (root / "deep" / "build" / "out.py").write_text(marked(HIDDEN_MARK))
    (root / "deep" / "secret_key.py").write_text(marked(HIDDEN_MARK))
    (root / "deep" / "keep.py").write_text(PATTERN.format("deep"))


def _unreadable(root: Path, outside: Path) -> None:
    (root / "locked.py").write_text(PATTERN.format("locked"))
    (root / "locked.py").chmod(0)


def _into_left_out(root: Path, outside: Path) -> None:
    """A link at the root to a file of a folder left out whole."""
    _sub(root, lambda p: p.write_text(gitignore_patterns(20_000)))
    link(root / "into.py", root / "sub" / "x.py")


def _into_ignored(root: Path, outside: Path) -> None:
    """A link at the root to a file that a deeper folder's .gitignore names."""
    (root / "pkg" / "vendor").mkdir(parents=True)
    (root / "pkg" / ".gitignore").write_text("vendor/\n")
    (root / "pkg" / "vendor" / "lib.py").write_text(marked(HIDDEN_MARK))
    link(root / "into.py", root / "pkg" / "vendor" / "lib.py")


def _huge(root: Path, outside: Path) -> None:
    with (root / "huge.py").open("wb") as f:
        f.truncate(5 << 20)  # sparse: 5 MB of NULs that take no disk


def _loop(root: Path, outside: Path) -> None:
    link(root / "a.py", root / "b.py")
    link(root / "b.py", root / "a.py")


def _to_hidden(root: Path, outside: Path) -> None:
    (root / ".hidden_conf.py").write_text(marked(HIDDEN_MARK))
    link(root / "peek.py", ".hidden_conf.py")


CASES: dict[str, Case] = {
    "dev_zero": Case(lambda r, o: link(r / "zero.py", "/dev/zero"), {"outside": 1}, ("zero.py",)),
    "dev_urandom": Case(
        lambda r, o: link(r / "urandom.py", "/dev/urandom"), {"outside": 1}, ("urandom.py",)
    ),
    "fifo": Case(lambda r, o: fifo(r / "pipe.py"), {"not_regular": 1}, ("pipe.py",)),
    "socket": Case(lambda r, o: unix_socket(r / "sock.py"), {"not_regular": 1}, ("sock.py",)),
    "outside_file": Case(
        lambda r, o: link(r / "secret.py", o / "secret.py"), {"outside": 1}, ("secret.py",)
    ),
    "etc_passwd": Case(
        lambda r, o: link(r / "passwd.py", "/etc/passwd"), {"outside": 1}, ("passwd.py",)
    ),
    "outside_folder": Case(lambda r, o: link(r / "lib", o), {}, ("lib/secret.py",)),
    "link_loop": Case(_loop, {"unreadable": 2}, ("a.py", "b.py")),
    "folder_loop": Case(lambda r, o: link(r / "d", "."), {}),
    "link_to_hidden": Case(_to_hidden, {"hidden": 2}, ("peek.py", ".hidden_conf.py")),
    "hidden_file": Case(
        lambda r, o: (r / ".hidden_conf.py").write_text(marked(HIDDEN_MARK)),
        {"hidden": 1},
        (".hidden_conf.py",),
    ),
    "huge_sparse": Case(_huge, {"too_large": 1}, ("huge.py",)),
    "nul_bytes": Case(
        lambda r, o: (r / "bin.py").write_bytes(b"x = 1\n\0\0\x7fELF\0" * 100),
        {"not_text": 1},
        ("bin.py",),
    ),
    "not_utf8": Case(
        lambda r, o: (r / "latin.py").write_bytes("s = 'café naïve'\n".encode("latin-1")),
        {"not_text": 1},
        ("latin.py",),
    ),
    "unreadable": Case(
        _unreadable,
        {} if ROOT_USER else {"unreadable": 1},
        () if ROOT_USER else ("locked.py",),
        files=2 if ROOT_USER else 1,  # root reads it: only that nothing breaks is checked
    ),
    "gitignore_20000": Case(
        lambda r, o: _sub(r, lambda p: p.write_text(gitignore_patterns(20_000))),
        {"ignore_file": 1},
        ("sub/x.py",),
    ),
    "gitignore_fifo": Case(lambda r, o: _sub(r, fifo), {"ignore_file": 1}, ("sub/x.py",)),
    "gitignore_dev_zero": Case(
        lambda r, o: _sub(r, lambda p: link(p, "/dev/zero")), {"ignore_file": 1}, ("sub/x.py",)
    ),
    "gitignore_binary": Case(
        lambda r, o: _sub(r, lambda p: p.write_bytes(b"*.pyc\n\0\xff\xfe" * 50)),
        {"ignore_file": 1},
        ("sub/x.py",),
    ),
    "link_into_left_out": Case(
        _into_left_out, {"ignore_file": 1, "ignored": 1}, ("into.py", "sub/x.py")
    ),
    "link_into_ignored": Case(_into_ignored, {"ignored": 1}, ("into.py", "pkg/vendor/lib.py")),
    "gitignore_negation": Case(_negation, {"ignored": 1}, ("made.gen.py",), files=2),
    "gitignore_double_star": Case(
        _double_star, {"ignored": 1}, ("deep/build/out.py", "deep/secret_key.py"), files=2
    ),
}


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    """(the root, with ok.py; a folder outside it holding the outside marker)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.py").write_text(marked(OUTSIDE_MARK))
    (root / "ok.py").write_text(PATTERN.format("users"))
    return root, outside


def _check_bounds(index: WorkspaceIndex, root: Path) -> list[str]:
    """The indexed paths all lie under the resolved root, and no draft at the hole carries a
    marker nor comes from outside it; the drafts' texts."""
    real = root.resolve()
    assert index.paths(), "nothing indexed"
    for path in index.paths():
        assert path == real or real in path.parents, path
    found = index.drafts((root / "query.py").as_uri(), HOLE, CURSOR, limit=50)
    for d in found:
        assert not any(m in d.text or m in d.where for m in MARKS), d
        assert d.where.startswith(str(real)), d.where
    return [d.text for d in found]


@pytest.mark.parametrize("name", list(CASES))
def test_a_hostile_thing_beside_an_ordinary_file(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    root, outside = _workspace(tmp_path)
    case.make(root, outside)
    index = WorkspaceIndex()
    n, took = bounded(index.build, [root])
    s = index.status()
    assert took < BUILD_S and s["ready"]
    assert set(s["skipped_by"]) <= set(REASONS)
    assert s["skipped_by"] == case.skipped
    assert n == s["files"] == case.files
    assert root.resolve() / "ok.py" in index.paths()
    assert LINE in _check_bounds(index, root)  # ok.py's line is still a draft
    for rel in case.hostile:
        updated, _ = bounded(index.update, root / rel)
        assert updated is False, rel
    assert index.status()["files"] == case.files  # nothing came in by update
    _check_bounds(index, root)


def test_the_markers_reach_a_draft_when_their_files_are_read(tmp_path: Path) -> None:
    """The control of the cases above: the same texts in ordinary files are drafts."""
    root, _ = _workspace(tmp_path)
    (root / "plain_secret.py").write_text(marked(OUTSIDE_MARK))
    (root / "plain_conf.py").write_text(marked(HIDDEN_MARK))
    index = WorkspaceIndex()
    index.build([root])
    texts = [d.text for d in index.drafts((root / "query.py").as_uri(), HOLE, CURSOR, limit=50)]
    assert any(OUTSIDE_MARK in t for t in texts) and any(HIDDEN_MARK in t for t in texts)
    assert LINE in texts


def test_a_root_gitignore_past_the_limits_leaves_the_root_out_whole(tmp_path: Path) -> None:
    """The rules of a folder whose .gitignore is too many patterns are unknown: nothing under
    it is read, the root included (infill_engine/workspace/files.py)."""
    root, _ = _workspace(tmp_path)
    (root / ".gitignore").write_text(gitignore_patterns(MAX_IGNORE_PATTERNS + 1))
    index = WorkspaceIndex()
    n, took = bounded(index.build, [root])
    assert took < BUILD_S and n == 0
    assert index.status()["skipped_by"] == {"ignore_file": 1}
    assert bounded(index.update, root / "ok.py")[0] is False


def test_a_dangling_gitignore_link_is_no_rules(tmp_path: Path) -> None:
    """A .gitignore that is a broken symlink says nothing: its folder is read as if it had
    none (git, since 2.32, reads no in-tree .gitignore through a symlink)."""
    root, _ = _workspace(tmp_path)
    _sub(root, lambda p: link(p, root / "missing"))
    index = WorkspaceIndex()
    n, _ = bounded(index.build, [root])
    assert n == 2 and root.resolve() / "sub" / "x.py" in index.paths()


def test_a_file_that_grows_while_it_is_read(tmp_path: Path) -> None:
    """A file appended to all through the build: read to max_file_bytes + 1 at most, then
    either indexed whole under the limit or left out as too large; once past the limit, an
    update drops it."""
    root, _ = _workspace(tmp_path)
    grow = root / "grow.py"
    grow.write_text("x = 0\n")
    limit = 64 * 1024
    with growing(grow):
        index = WorkspaceIndex(max_file_bytes=limit)
        _, took = bounded(index.build, [root])
        deadline = time.monotonic() + BUILD_S
        while grow.stat().st_size <= limit:
            assert time.monotonic() < deadline, "the file did not grow"
            time.sleep(0.01)
        updated, _ = bounded(index.update, grow)
    s = index.status()
    assert took < BUILD_S
    assert s["skipped_by"] in ({"too_large": 1}, {})
    assert updated is False and s["files"] == 1
    assert s["bytes"] == len(PATTERN.format("users"))


def test_a_size_that_lies_is_read_to_the_limit_plus_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fstat says 0 bytes (as /proc's files do, or a file grown since): read_regular reads at
    most limit + 1 bytes of a 5 MB file, and refuses it."""
    big = tmp_path / "big.py"
    big.write_bytes(b"x = 1\n" * ((5 << 20) // 6))
    real_fstat, real_read = os.fstat, os.read
    read = [0]

    def lying_fstat(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *st[1:6], 0, *st[7:]))

    def counted_read(fd: int, n: int) -> bytes:
        chunk = real_read(fd, n)
        read[0] += len(chunk)
        return chunk

    fake = SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    fake.fstat, fake.read = lying_fstat, counted_read
    monkeypatch.setattr(workspace_files, "os", fake)
    assert read_regular(big, 1000) == (None, "too_large")
    assert read[0] == 1001


def _swapped(
    path: Path, swap: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch
) -> tuple[bytes | None, str | None]:
    """read_regular on `path` swapped for something else after its lstat saw a regular file
    (the walk's view): what the open and fstat find."""
    path.write_text(PATTERN.format("swap"))
    seen = os.lstat(path)
    path.unlink()
    swap(path)
    fake = SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    fake.lstat = lambda p: seen
    monkeypatch.setattr(workspace_files, "os", fake)
    got, _ = bounded(read_regular, path, 1 << 20)
    return got


def test_a_fifo_swapped_in_after_the_walk_is_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _swapped(tmp_path / "swap.py", fifo, monkeypatch) == (None, "not_regular")


def test_a_symlink_swapped_in_after_the_walk_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    swap = tmp_path / "swap.py"
    assert _swapped(swap, lambda p: link(p, "/dev/zero"), monkeypatch) == (None, "unreadable")


def test_a_fifo_swapped_in_for_an_indexed_file(tmp_path: Path) -> None:
    """After the build: read_regular refuses it at once, and update drops it from the index."""
    root, _ = _workspace(tmp_path)
    swap = root / "swap.py"
    swap.write_text(PATTERN.format("swap"))
    index = WorkspaceIndex()
    assert bounded(index.build, [root])[0] == 2
    swap.unlink()
    os.mkfifo(swap)
    assert bounded(read_regular, swap, 1 << 20)[0] == (None, "not_regular")
    assert bounded(index.update, swap)[0] is False
    assert set(index.paths()) == {root.resolve() / "ok.py"}


# -- end to end: the real server over stdio -----------------------------------------------------
SETTINGS = {
    "decode": {"span": 8, "maxSpan": 8},
    "context": {"crossFile": False},
    "drafts": {"trustModel": None, "maxFileBytes": 64 * 1024},
    "completion": {"candidates": 8},
}


class Peer(StdioPeer):
    """The server on stdio, the index's work-done progress values recorded."""

    def __init__(self) -> None:
        self.progress: list[dict[str, Any]] = []
        super().__init__(SERVER)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        params = msg.get("params") or {}
        if msg.get("method") == "$/progress" and str(params["token"]).startswith("dllm-index"):
            self.progress.append(params["value"])
        super()._dispatch(msg)

    def initialize(self, folder: Path, settings: dict[str, Any] = SETTINGS) -> None:
        raw = converters.get_converter().unstructure(init_params(settings, folders=[folder]))
        assert "result" in self.reply(self.ask("initialize", raw), timeout=60)

    def ended(self) -> list[str]:
        return [v.get("message", "") for v in list(self.progress) if v.get("kind") == "end"]

    def rss_mib(self, field: str = "VmRSS") -> float:
        return rss_mib(self.proc.pid, field)

    def shutdown_s(self) -> float:
        """`shutdown`, its answer, `exit`: the seconds until the process is gone."""
        t0 = time.monotonic()
        assert "result" in self.reply(self.ask("shutdown"), timeout=SHUTDOWN_S)
        self.notify("exit", None)
        self.proc.wait(timeout=30)
        return time.monotonic() - t0


@pytest.fixture
def peer() -> Iterator[Peer]:
    if not Path("/proc/self/status").exists():
        pytest.skip("RSS is read from /proc")
    p = Peer()
    try:
        yield p
    finally:
        p.kill()


def _hostile_workspace(root: Path, outside: Path) -> tuple[dict[str, int], list[Path]]:
    """Every hostile thing of CASES, each in a folder of its own under `root`, plus pkg/users.py
    and pkg/groups.py: what the build leaves out, by reason, and the hostile paths."""
    expected: dict[str, int] = {}
    hostile = []
    for name, case in CASES.items():
        folder = root / name
        folder.mkdir()
        case.make(folder, outside)
        hostile += [folder / rel for rel in case.hostile]
        for why, n in case.skipped.items():
            expected[why] = expected.get(why, 0) + n
    (root / "pkg").mkdir()
    (root / "pkg" / "users.py").write_text(PATTERN.format("users"))
    (root / "pkg" / "groups.py").write_text(HOLE)
    return (
        expected,
        hostile,
    )  # folder links (folder_loop/d -> ., outside_folder/lib): not entered, no count


def test_the_server_indexes_a_hostile_workspace_and_serves_on(peer: Peer, tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.py").write_text(marked(OUTSIDE_MARK))
    expected, hostile = _hostile_workspace(root, outside)
    grow = root / "grow.py"
    grow.write_text("x = 0\n")
    with growing(grow):
        peer.initialize(root)
        rss0 = peer.rss_mib()
        t0 = time.monotonic()
        peer.notify("initialized", {})
        assert peer.wait_loaded()["state"] == "ready"
        loaded = peer.rss_mib()  # torch and the model: the build ran meanwhile
        deadline = t0 + 60
        while (ws := peer.status()["drafts"]["workspace"]) is None:
            assert time.monotonic() < deadline, "the workspace index was not built"
            time.sleep(0.05)
        ready_s = time.monotonic() - t0
    # the files indexed: pkg's two, keep.gen.py, deep/keep.py, and locked.py where root reads
    # it; grow.py when it was read before it passed maxFileBytes
    base = 4 + int(ROOT_USER)
    assert ws["files"] in (base, base + 1) and ws["ready"]
    if ws["files"] == base:
        expected["too_large"] += 1
    assert ws["skipped_by"] == expected and ws["bytes"] < 1 << 20
    told = peer.ended()
    assert len(told) == 1 and "left out:" in told[0], told
    for why, n in expected.items():
        assert f"{n} {why}" in told[0], told
    # each hostile path reported changed on disk: none comes in, grow.py (now too large) goes
    changes = [{"uri": p.as_uri(), "type": 2} for p in [*hostile, grow]]
    peer.notify("workspace/didChangeWatchedFiles", {"changes": changes})
    after = peer.status()["drafts"]["workspace"]  # answered once the notification is handled
    assert (after["files"], after["skipped_by"]) == (base, ws["skipped_by"])
    peer.open((root / "pkg" / "groups.py").as_uri(), HOLE)
    reply = peer.reply(
        peer.ask(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": (root / "pkg" / "groups.py").as_uri()},
                "position": {"line": 2, "character": 4},
                "context": {"triggerKind": 1},
            },
        ),
        timeout=60,
    )
    items = [i["insertText"] for i in reply["result"]["items"]]
    assert items and items[0] == LINE, items
    assert not any(m in str(reply) for m in MARKS), items
    peak = peer.rss_mib("VmHWM")  # over the whole run: the build, the updates, the completion
    growth = peak - loaded
    assert growth < RSS_GROWTH_MIB, (rss0, loaded, peak)
    down = peer.shutdown_s()
    assert down < SHUTDOWN_S and peer.proc.returncode == 0
    print(
        f"\nhostile workspace: index ready {ready_s:.2f} s after initialized (build_s "
        f"{ws['build_s']}), RSS {rss0:.0f} MiB at initialize, {loaded:.0f} MiB loaded, peak "
        f"{peak:.0f} MiB (+{growth:.0f}), shutdown to exit {down:.2f} s; {told[0]}"
    )


def test_exit_while_the_build_runs_ends_the_process_at_once(peer: Peer, tmp_path: Path) -> None:
    """A FIFO, a device link, 8000 small files and a .gitignore of 1990 patterns (about 1 ms a
    file to match): `shutdown` + `exit` sent while the build runs; the process is gone within
    SHUTDOWN_S. The engine is a service out of reach, so that no model load is in flight: exit
    during a load waits for it (engines/backend.py loads on asyncio.to_thread, which the
    interpreter joins; 4.6 s measured), which is not the index's doing."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".gitignore").write_text(gitignore_patterns(MAX_IGNORE_PATTERNS - 10))
    for i in range(80):
        (root / f"m{i:02d}").mkdir()
        for j in range(100):
            (root / f"m{i:02d}" / f"f{j}.py").write_text(f"x{j} = {i}\n")
    fifo(root / "pipe.py")
    link(root / "zero.py", "/dev/zero")
    settings = {**SETTINGS, "engineAddress": "http://127.0.0.1:9"}  # the discard port: refused
    peer.initialize(root, settings)
    peer.notify("initialized", {})
    assert peer.wait_loaded()["state"] == "failed"
    deadline = time.monotonic() + 30
    while not (reports := [v for v in list(peer.progress) if v.get("kind") == "report"]):
        assert time.monotonic() < deadline, "no progress from the build"
        time.sleep(0.01)
    assert peer.status()["drafts"]["workspace"] is None and not peer.ended(), "the build ended"
    down = peer.shutdown_s()
    assert down < SHUTDOWN_S and peer.proc.returncode == 0
    print(f"\nexit mid-build: shutdown to exit {down:.2f} s, at {reports[-1]['message']}")
