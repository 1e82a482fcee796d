"""The next-edit replay (lab/replay_edits.py) and the histories it reads (lab/histories.py): on a
small git repository built here, mining finds the commits of one file and their hunks; replay
steps keep the hunks still to come in place in both orders; the scoring rates hand-made
suggestions; the gate's fit picks the lowest threshold that keeps precision and false
suggestions in bounds; and one replay runs end to end through the real language server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dllm_lab.histories import Commit, Hunk, load, mine_repo, parse_hunks, save
from dllm_lab.replay_edits import (
    Probe,
    Span,
    Step,
    Tally,
    fit_thresholds,
    gated,
    in_process_candidates,
    relations,
    replay,
    report,
    score,
    steps,
    trimmed,
    write_thresholds,
)

AREA = 'def area(w, h):\n    """The area."""\n    return w * h\n\n\nprint(area(2, 3))'
RENAMED = 'def area(width, h):\n    """The area."""\n    return width * h\n\n\nprint(area(2, 3))'
PRINTED = RENAMED.replace("area(2, 3)", "area(4, 5)")  # one hunk


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, env=env, check=True)
    return done.stdout.decode().strip()


def _commit(root: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (root / name).write_text(text)
    _git(root, "add", *files)
    _git(root, "commit", "-q", "-m", message)
    return _git(root, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("history")
    _git(root, "init", "-q")
    shas = {
        "root": _commit(root, {"area.py": AREA, "notes.txt": "a\n"}, "first"),
        "rename": _commit(root, {"area.py": RENAMED}, "rename w"),
        "two files": _commit(root, {"area.py": RENAMED + "\n", "b.py": "x = 1\n"}, "two"),
        "text": _commit(root, {"notes.txt": "b\n"}, "not code"),
        "single": _commit(root, {"area.py": PRINTED + "\n"}, "one hunk"),
    }
    return root, shas


def test_mining_finds_the_commits_of_one_file_and_their_hunks(
    repo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, shas = repo
    commits = mine_repo(root, "t/area", "HEAD", "python", window=50, max_multi=5, max_single=5)
    by_sha = {c.sha: c for c in commits}
    assert set(by_sha) == {shas["rename"], shas["single"]}  # not the root, two files, nor text
    rename = by_sha[shas["rename"]]
    assert rename.path == "area.py" and rename.language == "python" and rename.text == AREA
    assert rename.hunks == (
        Hunk(0, "def area(w, h):\n", "def area(width, h):\n"),
        Hunk(2, "    return w * h\n", "    return width * h\n"),
    )
    assert rename.after() == RENAMED
    single = by_sha[shas["single"]]
    assert len(single.hunks) == 1 and single.after() == PRINTED + "\n"
    assert mine_repo(root, "t/area", "HEAD", "go", window=50) == []
    save(tmp_path / "h.json.gz", commits, {"set": "test"})
    assert load(tmp_path / "h.json.gz") == commits


def test_a_missing_final_newline_is_kept() -> None:
    diff = "@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
    assert parse_hunks(diff, "a\nb") == [Hunk(1, "b", "c")]
    diff = "@@ -1,0 +2 @@\n+x\n"  # an insertion after line 1
    assert parse_hunks(diff, "a\nb\n") == [Hunk(1, "", "x\n")]


def _rename_commit() -> Commit:
    hunks = (
        Hunk(0, "def area(w, h):\n", "def area(width, h):\n"),
        Hunk(2, "    return w * h\n", "    return width * h\n"),
    )
    return Commit("t/area", "0" * 40, "area.py", "python", AREA, hunks)


def test_steps_keep_the_hunks_to_come_in_place_in_both_orders() -> None:
    commit = _rename_commit()
    for order in ("forward", "backward"):
        done = list(steps(commit, order))
        assert len(done) == 2 and done[-1].text == RENAMED and not done[-1].remaining
        first = done[0]
        assert len(first.remaining) == 1
        assert first.remaining[0].applied(first.text) == RENAMED
        # only what changed is sent, and the cursor ends it
        assert first.change.text == "idth" and first.cursor == first.change.end + 4
    with pytest.raises(ValueError, match="order"):
        list(steps(commit, "sideways"))
    assert trimmed("abc", Span(0, 3, "abd")) == Span(2, 3, "d")


def test_the_shuffled_order_applies_every_hunk_in_an_order_of_its_commit() -> None:
    hunks = tuple(Hunk(i, f"x{i} = {i}\n", f"y{i} = {i}\n") for i in range(6))
    text = "".join(f"x{i} = {i}\n" for i in range(6))
    commit = Commit("t/xy", "1" * 40, "xy.py", "python", text, hunks)
    done = list(steps(commit, "shuffled"))
    assert done[-1].text == text.replace("x", "y") and not done[-1].remaining
    lines = [d.text.splitlines() for d in done]
    order = [next(i for i in range(6) if lines[k][i].startswith("y") and (
        k == 0 or lines[k - 1][i].startswith("x"))) for k in range(6)]  # fmt: skip
    assert sorted(order) == list(range(6)) and order not in (sorted(order), sorted(order)[::-1])
    assert [d.text for d in steps(commit, "shuffled")] == [d.text for d in done]  # seeded


def test_scoring_rates_exact_partial_location_and_strict() -> None:
    doc = "a = 1\nb = 2\nc = 3\nd = 4\n"
    line_b = Span(6, 12, "b = 20\n")  # a hunk: the whole line b rewritten
    line_d = Span(18, 24, "d = 40\n")
    # the same change by a smaller range: exact
    v = score(doc, Span(10, 11, "20"), [line_d, line_b])
    assert v.exact and not v.partial and v.location and not v.next_exact
    # a line that the hunk writes, with more around it: partial, and next
    v = score(doc, Span(18, 24, "d = 40\ne = 5\n"), [line_d, line_b])
    assert v.partial and not v.exact and v.next_partial and v.location
    # on the right line, the wrong text: location only
    v = score(doc, Span(18, 19, "x"), [line_d])
    assert v.location and not v.exact and not v.partial
    # far from every hunk: nothing
    v = score(doc, Span(0, 1, "z"), [line_d])
    assert not (v.exact or v.partial or v.location)
    # the right line, written where the hunk is not: not partial
    v = score(doc, Span(0, 6, "d = 40\n"), [line_d])
    assert not v.partial and not v.location
    # nothing owed (after the last hunk): nothing right
    assert score(doc, Span(10, 11, "20"), []) == score(doc, Span(0, 1, "z"), [])
    assert not any(
        score(doc, s, [line_d]).step for s in (Span(18, 19, "x"), Span(22, 23, "40"))
    )  # a token the hunk does not write; exact


def test_a_step_on_the_way_to_a_hunk_is_reported_beside_right() -> None:
    doc = "q = 1\nfetch(key, call)\nr = 2\n"
    at = doc.index("fetch")
    hunk = Span(at, at + len("fetch(key, call)"), "fetch({ key, fn })")
    renamed = Span(doc.index("call"), doc.index("call") + 4, "fn")
    v = score(doc, renamed, [hunk])
    assert v.step and not (v.exact or v.partial) and v.location
    # the same rename with a token the hunk never writes, or on a line the hunk leaves alone
    assert not score(doc, Span(renamed.start, renamed.end, "fn2"), [hunk]).step
    assert not score(doc, Span(0, 1, "fn"), [hunk]).step
    tally = Tally()
    tally.add(
        Step(renamed, doc, renamed.applied(doc), renamed.end, (hunk,), False), "rename", v, 1.0
    )
    r = tally.report()
    assert r["right_of_shown_pct"] == 0.0 and r["right_or_step_of_shown_pct"] == 100.0
    assert r["kinds"] == {"rename": {"step": 1}}


def test_the_fit_takes_the_lowest_threshold_within_bounds() -> None:
    probes = [
        *(Probe("successor", (("rename", 0.9, True),)) for _ in range(8)),
        *(Probe("successor", (("rename", 0.5, False),)) for _ in range(8)),
        Probe("successor", (("rename", 0.7, True), ("twin", 0.7, False))),
        *(Probe("successor", (("twin", 0.6, False),)) for _ in range(5)),
        *(Probe("single", ()) for _ in range(40)),
        Probe("single", (("rename", 0.95, False),)),  # 1 of 42 singles: 2.4 %, within 3 %
        Probe("single", (("twin", 0.8, False),)),
    ]
    fitted = fit_thresholds(probes)
    assert fitted == {"rename": 0.7, "twin": None}  # 0.5 brings precision to 9/17
    assert fit_thresholds(probes, max_false=0.0) == {"rename": None, "twin": None}
    shown = gated(probes, {"rename": 0.7, "twin": 2.0})
    assert shown["edits_with_successor"] == 22
    assert shown["right_of_shown_pct"] == 100.0 and shown["false_after_single_pct"] == 2.4


def test_the_fitted_thresholds_are_written_over_the_fitted_kinds_only(tmp_path: Path) -> None:
    path = tmp_path / "next_edits.json"
    path.write_text('{"about": "x", "thresholds": {"rename": 0.5, "twin": 0.7, "model": 0.9}}')
    write_thresholds({"rename": 0.8, "twin": None}, path)
    raw = json.loads(path.read_text())
    assert raw["about"] == "x" and raw["thresholds"] == {"rename": 0.8, "twin": 1.01, "model": 0.9}


def test_in_process_candidates_see_the_rename() -> None:
    probes = list(in_process_candidates(_rename_commit(), "forward"))
    assert [p.when for p in probes] == ["successor", "last"]
    assert ("rename", True) in {(k, right) for k, _, right in probes[0].found}


def test_relations_read_a_rename_as_the_same_replacement() -> None:
    commit = _rename_commit()
    assert relations([commit], ["forward", "backward"]) == {"same replacement": 2}
    moved = Commit(
        "t/m", "1" * 40, "m.py", "python", "a\nb\nc\n", (Hunk(0, "a\n", ""), Hunk(2, "", "z\n"))
    )
    assert relations([moved], ["forward"]) == {"other": 1}


def test_a_replay_through_the_language_server(repo: tuple[Path, dict[str, str]]) -> None:
    root, _ = repo
    commits = mine_repo(root, "t/area", "HEAD", "python", window=50)
    server = [sys.executable, "-m", "lsp_server", "--log-level", "WARNING"]
    settings = {"debounceMs": 0, "stats": {"enabled": False}}
    env = {**os.environ, "XDG_STATE_HOME": str(root / "state")}
    orders = ["forward", "backward"]
    groups, final = asyncio.run(replay(commits, orders, server, settings, env=env))
    assert final["state"] == "ready"
    out = report(groups, ["python"], orders)
    for order in orders:
        r = out["languages"]["python"][order]
        assert r["edits_with_successor"] == 1 and r["single_commits"] == 1
        assert r["requests"] == 3 and r["errors"] == 0 and r["p50_ms"] is not None
        assert r["counts"]["last"] == 1 and isinstance(r["kinds"], dict)
    assert out["languages"]["pooled"]["both"]["requests"] == 6
