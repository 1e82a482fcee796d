"""Real edit histories for the next-edit replay (replay_edits.py): small commits of public
repositories, mined from their git history.

    python -m dllm_lab.histories --set calibration --mirrors DIR --out FILE.json.gz
        [--languages python,go] [--list lab/histories.json]

A commit is kept when it is no merge, changes exactly one file, and that file is of a grammar
language (by its extension, grammars/manifest.json; JSX with JavaScript, TSX with TypeScript),
existed in the parent, is text (UTF-8, no carriage returns) of at most 200 KB, and its
`git diff -U0` has 1 to 8 hunks of at most 6 lines removed and 6 added each. A commit of 2 to
8 hunks is a case where an edit has a successor; a commit of one hunk, a probe for false
suggestions (after it, nothing is owed). Each repository gives at most `max_multi` of the first
and `max_single` of the second, drawn with a seeded shuffle from the `window` newest commits
below the recorded head: the same list file, mirrors and seed give the same histories.

lab/histories.json names the repositories per set (calibration, heldout) and language, each at
the head revision it was mined at. A mirror of owner/name is looked for as DIR/owner+name/repo,
DIR/owner+name, DIR/owner/name or DIR/name (a bare git directory or a work tree).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import grammars

LIST = Path(__file__).resolve().parents[1] / "histories.json"
LANGUAGES = ("python", "go", "rust", "typescript", "javascript", "java", "c", "cpp")
# the grammars' languageIds that are scored with another's
GROUP = {"typescriptreact": "typescript", "javascriptreact": "javascript"}
MAX_FILE_BYTES = 200_000
MAX_HUNKS = 8
MAX_HUNK_LINES = 6  # removed, and added, per hunk
_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Hunk:
    """The whole lines `old`, from 0-based line `line` of the parent's file, replaced by the
    whole lines `new` ("" for an insertion before `line`, or a deletion)."""

    line: int
    old: str
    new: str

    @property
    def line_delta(self) -> int:
        return len(split_lines(self.new)) - len(split_lines(self.old))


@dataclass(frozen=True)
class Commit:
    repo: str  # owner/name
    sha: str
    path: str
    language_id: str  # the grammar's (typescriptreact for .tsx)
    text: str  # the file in the parent commit
    hunks: tuple[Hunk, ...]  # top to bottom, not overlapping

    @property
    def language(self) -> str:
        """One of LANGUAGES: the language it is reported under."""
        return GROUP.get(self.language_id, self.language_id)

    def after(self) -> str:
        """The file in the commit: every hunk applied."""
        lines = split_lines(self.text)
        for h in reversed(self.hunks):
            lines[h.line : h.line + len(split_lines(h.old))] = split_lines(h.new)
        return "".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "hunks": [asdict(h) for h in self.hunks]}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Commit:
        hunks = tuple(Hunk(int(h["line"]), str(h["old"]), str(h["new"])) for h in raw["hunks"])
        return cls(raw["repo"], raw["sha"], raw["path"], raw["language_id"], raw["text"], hunks)


def split_lines(text: str) -> list[str]:
    """The lines of text, each with its "\\n" (the last one without, where the text has none)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def parse_hunks(diff: str, parent: str) -> list[Hunk]:
    """The hunks of a `git diff -U0` of one file, read off the parent's lines and the diff's
    added lines (so a missing final newline is kept as it is)."""
    lines = split_lines(parent)
    heads: list[tuple[int, int]] = []  # (0-based line, lines removed)
    news: list[list[str]] = []
    prev = ""
    for row in diff.split("\n"):
        m = _HEADER.match(row)
        if m:
            a, b = int(m.group(1)), 1 if m.group(2) is None else int(m.group(2))
            heads.append((a if b == 0 else a - 1, b))  # b == 0: an insertion after line a
            news.append([])
        elif news and row.startswith("+"):
            news[-1].append(row[1:] + "\n")
        elif news and news[-1] and row.startswith("\\") and prev.startswith("+"):
            news[-1][-1] = news[-1][-1][:-1]  # "\ No newline at end of file"
        prev = row
    return [
        Hunk(start, "".join(lines[start : start + n]), "".join(new))
        for (start, n), new in zip(heads, news, strict=True)
    ]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, check=False, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:2])} in {repo}: {done.stderr.decode()[:200]}")
    return done.stdout.decode("utf-8", errors="replace")


def _show(repo: Path, rev: str, path: str) -> str | None:
    """The file at rev as text, or None when it is missing, too large or not clean UTF-8."""
    done = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "blob", f"{rev}:{path}"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0 or len(done.stdout) > MAX_FILE_BYTES or b"\r" in done.stdout:
        return None
    try:
        return done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None


def small_commits(
    repo: Path, head: str, window: int, language: str
) -> Iterator[tuple[str, str, str]]:
    """(sha, parent, path) of the commits among the `window` newest below head that change one
    file, of `language` (its size checked on the diff: a snapshot may lack a large blob, which
    --numstat would need)."""
    log = _git(
        repo,
        "log",
        "--no-merges",
        "--no-renames",
        f"-n{window}",
        "--format=>%H %P",
        "--name-only",
        head,
    )
    for block in log.split("\n>"):
        rows = [r for r in block.strip().lstrip(">").split("\n") if r.strip()]
        if len(rows) != 2 or len(shas := rows[0].split()) != 2:
            continue  # a root commit, or not one file
        language_id = grammars.language_for_path(rows[1])
        if language_id is not None and GROUP.get(language_id, language_id) == language:
            yield shas[0], shas[1], rows[1]


def mine_commit(repo: Path, name: str, sha: str, parent: str, path: str) -> Commit | None:
    """The commit as a Commit, or None where it is not kept (see the module's docstring)."""
    language_id = grammars.language_for_path(path)
    if language_id is None or GROUP.get(language_id, language_id) not in LANGUAGES:
        return None
    before = _show(repo, parent, path)
    after = _show(repo, sha, path) if before is not None else None
    if before is None or after is None or before == after:
        return None
    try:
        diff = _git(repo, "diff", "-U0", "--no-renames", "--no-color", parent, sha, "--", path)
    except RuntimeError:
        return None
    hunks = parse_hunks(diff, before)
    if not 1 <= len(hunks) <= MAX_HUNKS:
        return None
    for h in hunks:
        if max(len(split_lines(h.old)), len(split_lines(h.new))) > MAX_HUNK_LINES:
            return None
    commit = Commit(name, sha, path, language_id, before, tuple(hunks))
    return commit if commit.after() == after else None


def mine_repo(
    repo: Path,
    name: str,
    head: str,
    language: str,
    *,
    window: int = 3000,
    seed: int = 0,
    max_multi: int = 100,
    max_single: int = 50,
) -> list[Commit]:
    """Up to max_multi commits of 2..8 hunks and max_single of one, changing a file of
    `language`, from a seeded shuffle."""
    found = list(small_commits(repo, head, window, language))
    random.Random(f"{seed}:{name}").shuffle(found)
    multi: list[Commit] = []
    single: list[Commit] = []
    for sha, parent, path in found:
        if len(multi) >= max_multi and len(single) >= max_single:
            break
        commit = mine_commit(repo, name, sha, parent, path)
        if commit is None:
            continue
        into = single if len(commit.hunks) == 1 else multi
        if len(into) < (max_single if into is single else max_multi):
            into.append(commit)
    return multi + single


def find_mirror(root: Path, name: str) -> Path:
    owner, _, short = name.partition("/")
    for p in (
        root / f"{owner}+{short}" / "repo",
        root / f"{owner}+{short}",
        root / name,
        root / short,
    ):
        if p.is_dir():
            return p
    raise FileNotFoundError(f"no mirror of {name} under {root}")


def load_list(path: Path = LIST) -> dict[str, Any]:
    raw = json.loads(path.read_text())
    if not isinstance(raw.get("sets"), dict):
        raise ValueError(f"{path}: no 'sets' of repositories")
    return dict(raw)


def repos_of(listing: dict[str, Any], set_name: str, languages: Sequence[str]) -> list[dict]:
    sets = listing["sets"]
    if set_name not in sets:
        raise ValueError(f"no set {set_name!r} in the list (it has {sorted(sets)})")
    return [dict(r, language=lang) for lang in languages for r in sets[set_name].get(lang, [])]


def save(path: Path, commits: Sequence[Commit], meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {**meta, "commits": [c.to_json() for c in commits]}
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(data, f)


def load(path: Path) -> list[Commit]:
    """Mined histories, as `save` (and the command) wrote them."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        raw = json.load(f)
    return [Commit.from_json(c) for c in raw["commits"]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m dllm_lab.histories", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--set", required=True, help="calibration or heldout (a set of the list)")
    ap.add_argument("--mirrors", type=Path, required=True, help="the folder of git mirrors")
    ap.add_argument("--out", type=Path, required=True, help="the histories' file (.json.gz)")
    ap.add_argument("--list", type=Path, default=LIST)
    ap.add_argument("--languages", default=",".join(LANGUAGES))
    a = ap.parse_args(argv)
    languages = [x for x in a.languages.split(",") if x]
    if bad := [x for x in languages if x not in LANGUAGES]:
        ap.error(f"--languages: not one of {list(LANGUAGES)}: {bad}")
    try:
        listing = load_list(a.list)
        cfg = listing.get("mining", {})
        knobs = {
            k: int(cfg.get(k, d))
            for k, d in (("window", 3000), ("seed", 0), ("max_multi", 100), ("max_single", 50))
        }
        commits: list[Commit] = []
        for r in repos_of(listing, a.set, languages):
            try:
                mirror = find_mirror(a.mirrors, r["repo"])
                got = mine_repo(mirror, r["repo"], r["head"], r["language"], **knobs)
            except (OSError, RuntimeError) as e:
                print(f"histories: {r['repo']} skipped: {e}", file=sys.stderr)
                continue
            multi = sum(len(c.hunks) > 1 for c in got)
            print(f"{r['repo']}: {multi} multi-hunk, {len(got) - multi} single", file=sys.stderr)
            commits.extend(got)
        save(
            a.out,
            commits,
            {"set": a.set, "mining": knobs, "repos": repos_of(listing, a.set, languages)},
        )
    except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        print(f"histories: {e}", file=sys.stderr)
        return 2
    print(f"histories: {len(commits)} commits -> {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
