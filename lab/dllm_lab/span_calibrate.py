"""Calibrate the span planner on the training corpus, and measure it with no model at all.

`python -m dllm_lab.span_calibrate` cuts holes of every kind from training-corpus
files (lab/holes.py), asks the planner for each hole's evidence (the same-file length its span
scales with), and writes `infill_engine/assets/span_table.json`: per planned kind, the median
and the 97th percentile of true/evidence, and of the true length in characters for holes with
no evidence. Nothing in the table is set by hand.

`planner_accuracy` is the planner's score on holes it never saw: the share of holes whose true
token length is at most `max_span`, and the median planned/true ratio, per language and kind.

`python -m dllm_lab.span_calibrate --measure` computes it on files the table was not
calibrated on: the Python corpus's held-out split, and sources of the seven other languages
that happen to be on this machine (`local_sources`; nothing is downloaded). It also times
`plan()` at cursors spread over 5,000-line files, with the parsed tree the language server
passes and without one (`plan_speed`). `--sources DIR` measures the files under DIR instead.
docs/planner.md has the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import random
import re
import statistics
import time
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from infill_engine import planner

from .holes import HOLE_KINDS, Hole, holes

Encode = Callable[[str], list[int]]


def cut_holes(
    files: Sequence[tuple[str, str]], per_kind: int, seed: int, progress: bool = True
) -> list[Hole]:
    """Up to `per_kind` holes of each kind from each (language_id, text) file."""
    rng = random.Random(seed)
    out: list[Hole] = []
    for language_id, text in tqdm(files, desc="holes", unit="file", disable=not progress):
        for kind in HOLE_KINDS:
            out.extend(holes(text, language_id, kind, rng, per_kind))
    return out


def observe(
    hole: Hole, encode: Encode, tree: Any | None = None
) -> tuple[planner.SpanPlan, int, float]:
    """The plan for a hole, the middle's true token length, and the planning time in ms (with
    `tree`, the hole's parsed tree, as the language server plans)."""
    t0 = time.perf_counter()
    p = planner.plan(hole.text, hole.offset, hole.language_id, encode, tree=tree)
    ms = (time.perf_counter() - t0) * 1000
    return p, len(encode(hole.middle)), ms


def calibrate(observed: Sequence[tuple[Hole, planner.SpanPlan, int]]) -> dict[str, Any]:
    ratios: dict[str, list[float]] = defaultdict(list)
    chars: dict[str, list[float]] = defaultdict(list)
    for hole, p, true in observed:
        if true == 0:
            continue
        chars[p.kind].append(float(len(hole.middle)))
        if p.evidence:
            ratios[p.kind].append(true / p.evidence)
    kinds: dict[str, dict[str, float]] = {}
    for kind in set(ratios) | set(chars):
        r, c = ratios.get(kind, []), chars.get(kind, [])
        if len(r) < 20 and len(c) < 20:
            continue  # too few to say anything: the planner keeps its fallback for this kind
        fallback = planner.FALLBACK[kind]
        kinds[kind] = {
            "ratio": round(statistics.median(r), 3) if len(r) >= 20 else fallback["ratio"],
            "ratio_hi": round(_quantile(r, 0.97), 3) if len(r) >= 20 else fallback["ratio_hi"],
            "default": round(statistics.median(c), 1) if c else fallback["default"],
            "default_hi": round(_quantile(c, 0.97), 1) if c else fallback["default_hi"],
            "holes": len(c),
            "with_evidence": len(r),
        }
    return kinds


def planner_accuracy(
    observed: Sequence[tuple[Hole, planner.SpanPlan, int, float]],
) -> dict[str, dict[str, Any]]:
    """Per "language/kind" (the hole's true kind): holes, fit share, median planned/true, the
    share the planner classified as that kind, and planning ms at p95."""
    groups: dict[str, list[tuple[Hole, planner.SpanPlan, int, float]]] = defaultdict(list)
    for item in observed:
        hole = item[0]
        groups[f"{hole.language_id}/{hole.kind}"].append(item)
        groups[f"{hole.language_id}/all"].append(item)
    out = {}
    for key, items in sorted(groups.items()):
        fits = [true <= p.max_span for _, p, true, _ in items if true]
        ratios = [p.span / true for _, p, true, _ in items if true]
        out[key] = {
            "holes": len(items),
            "fits_max_span": round(sum(fits) / max(1, len(fits)), 3),
            "median_planned_over_true": round(statistics.median(ratios), 2) if ratios else None,
            "kind_agrees": round(
                sum(h.kind == p.kind or _compatible(h.kind, p.kind) for h, p, _, _ in items)
                / len(items),
                3,
            ),
            "plan_ms_p95": round(_quantile([ms for *_, ms in items], 0.95), 2),
        }
    return out


def _compatible(true_kind: str, planned: str) -> bool:
    """A body hole planned as another body kind still gets a body's stop rule."""
    bodies = {"function_body", "block_body", "empty_body"}
    return true_kind in bodies and planned in bodies


def _quantile(xs: Sequence[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def encoder(model: str) -> Encode:
    """A model directory's tokenizer as a plain encode function (no weights are loaded)."""
    from infill_engine.loader import load_tokenizer, resolve_model_dir

    tok = load_tokenizer(resolve_model_dir(model))

    def encode(text: str) -> list[int]:
        # whole files are counted, not run: no warning that one is longer than the model's
        # positions (verbose=False)
        return list(tok(text, add_special_tokens=False, verbose=False)["input_ids"]) if text else []

    return encode


def python_training_files(limit: int, seed: int) -> list[tuple[str, str]]:
    from .corpus import split_corpus

    train, _ = split_corpus(sources=("stdlib",))
    rng = random.Random(seed)
    rng.shuffle(train)
    return [("python", f.text) for f in train[:limit]]


# -- measuring: held-out files, other languages, planning speed -------------------------------
MIN_BYTES, MAX_BYTES = 200, 400_000  # a source file's size, as the corpus takes them
LONG_FILE_LINES = 5_000  # the planning-speed files
SPEED_LANGUAGES = ("python", "javascript", "c")
SKIP_DIRS = frozenset({"test", "tests", "__tests__", "testdata", "fixtures", "__pycache__"})
_RUSTDOC_CODE = re.compile(r'<pre class="rust"><code>(.*?)</code></pre>', re.S)
_RUSTDOC_LINE_NUMBER = re.compile(r"<a href=#\d+ id=\d+ data-nosnippet>\d+</a>")
_TAG = re.compile(r"<[^>]+>")
_CPP_SYNTAX = re.compile(
    r"^\s*(namespace\b|template\s*<|class\s+\w+[^;]*\{|extern \"C\+\+\")", re.M
)


@dataclass(frozen=True)
class Source:
    language_id: str
    name: str  # a path, or an archive's path and its member
    origin: str  # where it was found, for the report
    text: str


@dataclass(frozen=True)
class _Candidate:
    language_id: str
    tier: int  # taken after every file of a lower tier
    name: str
    origin: str
    read: Callable[[], str | None]


def default_roots() -> list[Path]:
    """Where `local_sources` looks: system headers, globally installed node packages, shared
    documentation and examples, and the Go, Cargo and rustup trees when there are any."""
    home = Path.home()
    found = [
        Path("/usr/include"),
        Path("/usr/lib/node_modules"),
        Path("/usr/share"),
        Path("/usr/local"),
        Path("/opt"),
        *sorted(Path("/usr/lib").glob("go*/src")),
        home / "go",
        home / ".cargo" / "registry" / "src",
        home / ".rustup" / "toolchains",
    ]
    return [p for p in found if p.is_dir()]


def local_sources(
    per_language: int, seed: int, roots: Sequence[Path] | None = None
) -> dict[str, list[Source]]:
    """Source files of languages other than Python that are on this machine anyway, up to
    `per_language` each, drawn in a seeded random order; nothing is downloaded.

    Files are found under `roots` (default: `default_roots()`) by extension, skipping folders
    of tests, minified files and duplicates. A `.h` is taken only under /usr/include: as C++
    under `c++/` (with libstdc++'s extensionless headers), else as C unless it declares a
    namespace, a class or a template (then it is left out). Rust also comes from rustdoc's
    source pages of the standard library (the code taken out of the HTML), and, with the
    default roots, Java from a JDK's `lib/src.zip` under /usr/lib/jvm. Headers and rustdoc
    pages are a second tier, taken only when the first (C and C++ sources, `.rs` files) has
    too few."""
    candidates: list[_Candidate] = []
    for root in roots if roots is not None else default_roots():
        candidates.extend(_candidates(root))
    jdks = Path("/usr/lib/jvm").glob("*/lib/src.zip") if roots is None else ()
    for archive in sorted({p.resolve() for p in jdks}):
        if archive.is_file():
            with zipfile.ZipFile(archive) as z:
                members = sorted(n for n in z.namelist() if n.endswith(".java"))
            candidates.extend(
                _Candidate("java", 0, f"{archive}!{m}", str(archive), _zip_reader(archive, m))
                for m in members
                if not SKIP_DIRS.intersection(m.split("/")[:-1])
            )
            break  # one JDK's sources are plenty
    by_language: dict[str, list[_Candidate]] = defaultdict(list)
    for c in candidates:
        by_language[c.language_id].append(c)
    out: dict[str, list[Source]] = {}
    for language_id, found in sorted(by_language.items()):
        rng = random.Random(f"{seed}/{language_id}")
        order = sorted(found, key=lambda c: c.name)
        rng.shuffle(order)
        order.sort(key=lambda c: c.tier)  # stable: the seeded order within each tier
        chosen = _take(order, per_language)
        if chosen:
            out[language_id] = chosen
    return out


def _candidates(root: Path) -> Iterator[_Candidate]:
    import grammars

    for path in _walk(root):
        name = path.name.lower()
        origin = str(root)
        in_cpp = "c++" in path.parts
        if name.endswith(".rs.html") and "src" in path.parts:
            yield _Candidate("rust", 1, str(path), origin, _reader(path, _rustdoc_source))
            continue
        if in_cpp and (name.endswith((".h", ".tcc")) or "." not in name):
            yield _Candidate("cpp", 1, str(path), origin, _reader(path))
            continue
        language_id = grammars.language_for_path(name)
        if language_id is None or language_id == "python":
            continue
        if ".rustup" in path.parts and language_id != "rust":
            continue  # rustdoc's generated scripts
        if name.endswith(".h"):
            if str(root) == "/usr/include":
                yield _Candidate("c", 1, str(path), origin, _reader(path, _c_only))
            continue  # elsewhere a package's .h is as often C++ as C
        yield _Candidate(language_id, 0, str(path), origin, _reader(path))


def _walk(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for f in sorted(files):
            yield Path(folder) / f


def _take(order: Sequence[_Candidate], n: int) -> list[Source]:
    chosen: list[Source] = []
    seen: set[str] = set()
    for c in order:
        if len(chosen) >= n:
            break
        text = c.read()
        if text is None or _minified(text):
            continue
        digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
        if digest not in seen:
            seen.add(digest)
            chosen.append(Source(c.language_id, c.name, c.origin, text))
    return chosen


def _decode(raw: bytes) -> str | None:
    if not MIN_BYTES <= len(raw) <= MAX_BYTES:
        return None
    try:
        return raw.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError:
        return None


def _reader(
    path: Path, convert: Callable[[str], str | None] | None = None
) -> Callable[[], str | None]:
    def read() -> str | None:
        try:
            text = _decode(path.read_bytes()) if path.is_file() else None
        except OSError:
            return None
        return convert(text) if convert is not None and text is not None else text

    return read


def _zip_reader(archive: Path, member: str) -> Callable[[], str | None]:
    def read() -> str | None:
        with zipfile.ZipFile(archive) as z:
            return _decode(z.read(member))

    return read


def _rustdoc_source(page: str) -> str | None:
    """The Rust source a rustdoc `src/**/*.rs.html` page shows, without its line numbers."""
    m = _RUSTDOC_CODE.search(page)
    if m is None:
        return None
    return html.unescape(_TAG.sub("", _RUSTDOC_LINE_NUMBER.sub("", m.group(1))))


def _c_only(text: str) -> str | None:
    return None if _CPP_SYNTAX.search(text) else text


def _minified(text: str) -> bool:
    lines = text.count("\n") + 1
    return len(text) / lines > 100 or max(map(len, text.split("\n"))) > 2000


def held_out_python(per_language: int, seed: int) -> list[Source]:
    """Python files of the corpus's held-out split (the table is calibrated on the rest)."""
    from .corpus import split_corpus

    _, held = split_corpus(sources=("stdlib",))
    rng = random.Random(f"{seed}/python")
    rng.shuffle(held)
    return [Source("python", f.rel, "stdlib, held-out split", f.text) for f in held[:per_language]]


def sources_under(paths: Sequence[Path]) -> dict[str, list[Source]]:
    """The files under `paths` that have a grammar, by language (`--sources`)."""
    import grammars

    out: dict[str, list[Source]] = defaultdict(list)
    for root in paths:
        for path in [root] if root.is_file() else list(_walk(root)):
            language_id = grammars.language_for_path(path.name)
            text = _reader(path)() if language_id is not None else None
            if language_id is not None and text is not None:
                out[language_id].append(Source(language_id, str(path), str(root), text))
    return dict(sorted(out.items()))


def long_file(texts: Sequence[str], lines: int = LONG_FILE_LINES) -> str:
    """Exactly `lines` lines made of the texts one after another (again from the first when
    they run out)."""
    if not any(t.strip() for t in texts):
        raise ValueError("no text to make a long file of")
    out: list[str] = []
    while len(out) < lines:
        for t in texts:
            out.extend(t.rstrip("\n").split("\n"))
            out.append("")
            if len(out) >= lines:
                break
    return "\n".join(out[:lines]) + "\n"


def cursor_positions(text: str, n: int, seed: int) -> list[int]:
    """`n` cursors, a third each: anywhere (mostly inside a line), just after a block opener
    at the end of a line (the body kinds, the ones that query the grammar), and on a blank
    line (a statement or a body)."""
    rng = random.Random(seed)
    openers = [m.end() for m in re.finditer(r"[:{][ \t]*$", text, re.M)]
    blanks = [m.end() for m in re.finditer(r"^[ \t]*$", text, re.M)]
    out = []
    for i in range(n):
        pool = (None, openers, blanks)[i % 3]
        out.append(rng.choice(pool) if pool else rng.randrange(len(text) + 1))
    return out


def plan_speed(
    text: str, language_id: str, encode: Encode, positions: int, seed: int
) -> dict[str, Any]:
    """`plan()` times in ms at `positions` cursors of one file: "tree" with the parsed tree the
    language server passes and nothing remembered from an earlier plan (the first request at a
    cursor), "tree_again" the same plan repeated (the next keystroke's), "no_tree" parsing the
    text itself."""
    import grammars

    parser = grammars.parser(language_id)
    tree = parser.parse(text.encode("utf-8")) if parser is not None else None
    offsets = cursor_positions(text, positions, seed)
    times: dict[str, list[float]] = {"tree": [], "tree_again": [], "no_tree": []}
    kinds: dict[str, int] = defaultdict(int)
    for offset in offsets:
        for run, t in (("tree", tree), ("tree_again", tree), ("no_tree", None)):
            if run != "tree_again":
                planner.clear_caches()
            t0 = time.perf_counter()
            p = planner.plan(text, offset, language_id, encode, tree=t)
            times[run].append((time.perf_counter() - t0) * 1000)
        kinds[p.kind] += 1
    out: dict[str, Any] = {
        "lines": text.count("\n"),
        "chars": len(text),
        "positions": len(offsets),
        "kinds": dict(sorted(kinds.items())),
    }
    for run, ms in times.items():
        out[run] = {
            "p50": round(_quantile(ms, 0.5), 2),
            "p95": round(_quantile(ms, 0.95), 2),
            "max": round(max(ms, default=0.0), 2),
        }
    return out


def measure(
    encode: Encode,
    *,
    per_language: int = 60,
    per_kind: int = 3,
    seed: int = 0,
    sources: Sequence[Path] | None = None,
    speed_positions: int = 200,
    progress: bool = True,
) -> dict[str, Any]:
    """The planner's accuracy on holes it was not calibrated on, per language and kind, and its
    speed on 5,000-line files. Each hole is planned with its parsed tree, as the server plans."""
    import grammars

    if sources is not None:
        corpus = sources_under(sources)
    else:
        corpus = {"python": held_out_python(per_language, seed)}
        corpus.update(local_sources(per_language, seed))
    files = [(s.language_id, s.text) for found in corpus.values() for s in found]
    cut = cut_holes(files, per_kind, seed, progress)
    observed = []
    for hole in tqdm(cut, desc="plan", unit="hole", disable=not progress):
        parser = grammars.parser(hole.language_id)
        tree = parser.parse(hole.text.encode("utf-8")) if parser is not None else None
        p, true, ms = observe(hole, encode, tree)
        observed.append((hole, p, true, ms))
    report: dict[str, Any] = {
        "files": {
            lang: {
                "files": len(found),
                "from": dict(sorted(_count(s.origin for s in found).items())),
            }
            for lang, found in corpus.items()
        },
        "holes": len(cut),
        "accuracy": planner_accuracy(observed),
        "speed": {},
    }
    if speed_positions > 0:
        for lang in tqdm(
            [x for x in SPEED_LANGUAGES if x in corpus], desc="speed", disable=not progress
        ):
            text = long_file([s.text for s in corpus[lang]])
            report["speed"][lang] = plan_speed(text, lang, encode, speed_positions, seed)
    return report


def _count(xs: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for x in xs:
        out[x] += 1
    return out


def format_report(report: dict[str, Any]) -> str:
    lines = [f"{report['holes']} holes from:"]
    for lang, f in report["files"].items():
        where = ", ".join(f"{origin} ({n})" for origin, n in f["from"].items())
        lines.append(f"  {lang}: {f['files']} files: {where}")
    lines += [
        "",
        f"{'language/kind':28} {'holes':>6} {'fits max_span':>13} {'planned/true':>12} "
        f"{'kind agrees':>11} {'plan ms p95':>11}",
    ]
    for key, row in report["accuracy"].items():
        ratio = row["median_planned_over_true"]
        lines.append(
            f"{key:28} {row['holes']:>6} {row['fits_max_span']:>13.3f} "
            f"{'-' if ratio is None else f'{ratio:.2f}':>12} {row['kind_agrees']:>11.3f} "
            f"{row['plan_ms_p95']:>11.2f}"
        )
    if report["speed"]:
        lines += ["", "plan() ms, p50 / p95, at cursors in files of 5,000 lines:"]
        for lang, s in report["speed"].items():
            runs = "   ".join(
                f"{run} {s[run]['p50']:.2f} / {s[run]['p95']:.2f}"
                for run in ("tree", "tree_again", "no_tree")
            )
            lines.append(f"  {lang:10} {s['lines']} lines, {s['positions']} cursors: {runs}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dllm_lab.span_calibrate")
    ap.add_argument("--model", default="builtin", help="its tokenizer counts the tokens")
    ap.add_argument("--files", type=int, default=300, help="training files to cut holes from")
    ap.add_argument("--per-kind", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=planner.TABLE)
    ap.add_argument(
        "--measure",
        action="store_true",
        help="score the planner on files it was not calibrated on, and time it (writes nothing)",
    )
    ap.add_argument(
        "--per-language", type=int, default=60, help="--measure: files per language at most"
    )
    ap.add_argument(
        "--sources",
        type=Path,
        nargs="+",
        help="--measure: the files under these paths, not the held-out and local sources",
    )
    ap.add_argument(
        "--speed-positions",
        type=int,
        default=200,
        help="--measure: cursors timed in each 5,000-line file (0: no timing)",
    )
    ap.add_argument("--json", action="store_true", help="--measure: print JSON, not a table")
    args = ap.parse_args(argv)
    encode = encoder(args.model)
    if args.measure:
        report = measure(
            encode,
            per_language=args.per_language,
            per_kind=args.per_kind,
            seed=args.seed,
            sources=args.sources,
            speed_positions=args.speed_positions,
        )
        print(json.dumps(report, indent=1) if args.json else format_report(report))
        return 0
    files = python_training_files(args.files, args.seed)
    cut = cut_holes(files, args.per_kind, args.seed)
    observed = []
    for hole in tqdm(cut, desc="plan", unit="hole"):
        p, true, _ = observe(hole, encode)
        observed.append((hole, p, true))
    kinds = calibrate(observed)
    table = {
        "about": "written by python -m dllm_lab.span_calibrate; do not edit by hand",
        "source": f"{len(files)} training files of the Python corpus, {len(cut)} holes",
        "kinds": kinds,
    }
    args.out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(json.dumps(table, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
