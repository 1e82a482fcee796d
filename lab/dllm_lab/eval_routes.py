"""Do the engine service's HTTP routes answer what the language server shows? Measured on
held-out single-line holes.

    python -m dllm_lab.eval_routes FOLDER [FOLDER ...] [--holes 100] [--seed 0] [--json]

Holes: N single-line holes cut from the Python files under the folders (files chosen with a
fixed seed, none over 2,000 lines, no tests or vendored trees, in turn so that each file gives
at most one hole until all have given one): a non-blank line of at least 8 characters (after its
indentation) is taken out, its indentation left, the cursor after the indentation. Held-out
code only: a file the builtin model's corpus trained on (lab/dllm_lab/corpus.py: the standard
library and site-packages, all but the 3 % split `is_held_out` keeps out) is skipped, and so are
the standard library packages the drafts' gate was calibrated on (drafts/gate.py,
calibrate_drafts.py: asyncio, email, logging, importlib, concurrent, http, xml). A folder
outside both trees is read whole (`--all-files` reads every file anywhere).

Two servers, one model (the builtin one unless `--model`): ONE engine service in this process
(infill_engine.service: the HTTP front on a loopback port, with a token) and ONE language server
(`python -m lsp_server`) over stdio, with no workspace folder (it drafts from the open document
alone: what the HTTP routes get), `debounceMs: 0`, its other settings the defaults (an invoked
request asks `candidates`, 3, fills). Every hole's document is opened at one and the same URI
(closed after its request), so that the server's cross-file store never offers the model another
hole's file: the server sees exactly the text an HTTP request carries.

For each hole: the language server's first item of an invoked `textDocument/inlineCompletion`
("" when none; an item replaces the rest of the line, which is empty here), then the routes:

| route            | request                                                            |
|------------------|--------------------------------------------------------------------|
| infill           | `POST /infill`, input_prefix / input_suffix, languageId "python"   |
| infill_guess     | the same without languageId (as llama.vim sends: the language guessed) |
| completions      | `POST /v1/completions`, prompt / suffix, languageId "python"       |
| infill_n3        | `/infill` with `n_cmpl: 3` (the server's candidates): the first reply |
| completions_n3   | `/v1/completions` with `n: 3`: the first choice                    |
| v2_shown         | `POST /v2/infill`, trigger invoked, candidates 3: `shown[0]`       |
| infill_raw       | `/infill` with `raw: true`: the model's own text (the "before")    |
| fill             | `dllm-infill fill` in this process (cli_fill.fill_at), its defaults |

`--workspace`: the folders are the workspace of both sides, read in full (a budget of
WORKSPACE_SECONDS): the language server's workspace folders, and the index `fill` drafts from
(infill_engine/workspace, built here as `fill` builds it). Then the HTTP routes, which carry no
workspace, may differ where a workspace draft wins; `fill` should not. The hole's own file is
in the workspace on both sides (the document's URI is not its path): its true line may be
drafted from it, which raises `exact`, not agreement.

Figures per route (and the language server's own): holes; `adds_syntax_error`, the non-empty
answers that break a file which compiled (the original file compiles, the document with the
answer in place does not); `agree`, the answers equal to the server's first item (exact string
equality, "" and "" agree) and `agree_shown`, the same among the holes where the server showed
something; `exact`, the answers equal to the true line (both stripped of surrounding
whitespace); p50 of the request's round trip (the server's: its engine call too, from
`dllm/status`, read outside the timing). `--json` adds every hole's answers (`cases`). Each
route's first disagreements are listed (`under_95` marks a route under 95 % agreement) with
both texts and a reason inferred from the other routes: the
default route differs but its 3-candidate twin agrees ("candidates"), the guessed language is
not Python ("language"), the server's text is among the 3-candidate route's replies but not
first ("order"), or the texts differ on the same request shape ("other").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from .bench_lsp import plain
from .corpus import is_held_out, stdlib_root

MAX_LINES = 2000
MIN_CHARS = 8
# The standard library packages the drafts' gate and weights were fitted on (calibrate_drafts.py).
GATE_PACKAGES = frozenset({"asyncio", "email", "logging", "importlib", "concurrent", "http", "xml"})
SKIP_DIRS = frozenset({"test", "tests", "__pycache__", "_vendor", "vendored", "_vendored"})
SITE_DIRS = ("site-packages", "dist-packages")
# Characters LSP clients or pygls may count as a line break besides "\n": files holding one are
# skipped, so that a hole's line number means the same line on both sides.
ODD_BREAKS = frozenset("\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
AGREEMENT_WANTED = 0.95
SHOW_DISAGREEMENTS = 10
WORKSPACE_SECONDS = 600.0  # the index's time budget, on both sides: no build stops at it
URI = "file:///eval_routes/hole.py"  # every hole's document, one at a time

# route -> (path, request fields beside the hole's text)
ROUTES: dict[str, tuple[str, dict[str, Any]]] = {
    "infill": ("/infill", {"languageId": "python"}),
    "infill_guess": ("/infill", {}),
    "completions": ("/v1/completions", {"languageId": "python"}),
    "infill_n3": ("/infill", {"languageId": "python", "n_cmpl": 3}),
    "completions_n3": ("/v1/completions", {"languageId": "python", "n": 3}),
    "v2_shown": ("/v2/infill", {"languageId": "python", "trigger": "invoked", "candidates": 3}),
    "infill_raw": ("/infill", {"languageId": "python", "raw": True}),
}
# Routes answered in this process, not over HTTP: `fill`, the command line's code.
LOCAL = ("fill",)
ALL_ROUTES = (*ROUTES, *LOCAL)
TWINS = {"infill": "infill_n3", "completions": "completions_n3", "infill_guess": "infill_n3"}


@dataclass(frozen=True)
class Case:
    """One hole: the document with the line's text taken out, the cursor after its indentation."""

    origin: str  # the file
    original: str  # the whole file
    text: str  # the document with the hole
    offset: int  # the cursor, a str offset into text
    line: int  # the cursor's line (0-based) and column (the indentation: ASCII whitespace)
    column: int
    truth: str  # the line's text after its indentation
    compiles: bool  # whether the original file compiles

    @property
    def before(self) -> str:
        return self.text[: self.offset]

    @property
    def after(self) -> str:
        return self.text[self.offset :]

    def breaks(self, answer: str) -> bool:
        """The answer adds a syntax error: the file compiled, with the answer in place it does
        not (an empty answer adds nothing)."""
        return bool(answer) and self.compiles and not _compiles(self.before + answer + self.after)

    @property
    def hole_compiles(self) -> bool:
        """Whether the document with the hole (its line's text taken out) compiles."""
        return _compiles(self.text)

    def exact(self, answer: str) -> bool:
        return answer.strip() == self.truth.strip()


def _compiles(source: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning: invalid escapes and the like
        try:
            compile(source, "<hole>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return False
    return True


def corpus_key(path: Path) -> str | None:
    """The key the builtin model's corpus split `path` by (corpus.py: `site-packages/<pkg>/...`
    or the path under the standard library), None for a file outside both trees."""
    parts = path.resolve().parts
    for i, part in enumerate(parts):
        if part in SITE_DIRS:
            return "site-packages/" + "/".join(parts[i + 1 :])
    try:
        return path.resolve().relative_to(stdlib_root().resolve()).as_posix()
    except ValueError:
        return None


def unseen(path: Path) -> bool:
    """Neither the builtin model's training nor the drafts' gate calibration read the file."""
    key = corpus_key(path)
    if key is None:
        return True
    if not key.startswith("site-packages/") and key.split("/", 1)[0] in GATE_PACKAGES:
        return False
    return is_held_out(key)


def source_files(folders: Sequence[Path], all_files: bool = False) -> list[tuple[Path, str]]:
    """The usable Python files under the folders, sorted, no repeats: held out (`unseen`) unless
    `all_files`, UTF-8, at most MAX_LINES lines, no odd line breaks, no tests or vendored trees."""
    out: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for folder in folders:
        paths = [folder] if folder.is_file() else sorted(folder.rglob("*.py"))
        for p in paths:
            rel = p.relative_to(folder).parts if p != folder else (p.name,)
            if p.resolve() in seen or SKIP_DIRS & set(rel[:-1]) or rel[-1].startswith("test_"):
                continue
            seen.add(p.resolve())
            if not p.is_file() or (not all_files and not unseen(p)):
                continue
            try:
                text = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if text and text.count("\n") < MAX_LINES and not ODD_BREAKS & set(text):
                out.append((p, text))
    return out


def cut_holes(
    folders: Sequence[Path], n: int, seed: int = 0, all_files: bool = False
) -> tuple[list[Case], int]:
    """n holes (fewer when the files have too few lines) and the number of files eligible."""
    files = source_files(folders, all_files)
    rng = random.Random(seed)
    rng.shuffle(files)
    rows: list[list[int]] = []
    for _, text in files:
        lines = text.split("\n")
        rows.append([i for i, s in enumerate(lines) if len(s.strip()) >= MIN_CHARS])
    cases: list[Case] = []
    while len(cases) < n and any(rows):
        for (path, text), free in zip(files, rows, strict=True):
            if len(cases) >= n:
                break
            if not free:
                continue
            row = free.pop(rng.randrange(len(free)))
            cases.append(_case(path, text, row))
    return cases, len(files)


def _case(path: Path, text: str, row: int) -> Case:
    lines = text.split("\n")
    line = lines[row]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    holed = "\n".join([*lines[:row], indent, *lines[row + 1 :]])
    offset = sum(len(s) + 1 for s in lines[:row]) + len(indent)
    truth = line[len(indent) :].rstrip()
    return Case(str(path), text, holed, offset, row, len(indent), truth, _compiles(text))


# -- the two servers ---------------------------------------------------------------------------


def _item_text(item: lsp.InlineCompletionItem, rest: str) -> str:
    """What an inline item inserts at the cursor: its text less the rest of the line it
    replaces (lsp_server/protocol/handlers.py: each item is the fill followed by that rest)."""
    t = item.insert_text
    text = t if isinstance(t, str) else t.value
    return text[: len(text) - len(rest)] if rest and text.endswith(rest) else text


class Lsp:
    """The real language server over stdio, with the workspace folders `folders` (none: it
    drafts from the open document alone)."""

    def __init__(
        self, model: str, device: str, env: dict[str, str], folders: Sequence[Path] = ()
    ) -> None:
        self.client = LanguageClient("dllm-eval-routes", "0")
        self.settings: dict[str, Any] = {
            "model": model,
            "device": device,
            "debounceMs": 0,
            "stats": {"enabled": False},
        }
        if folders:
            self.settings["drafts"] = {"maxSeconds": WORKSPACE_SECONDS}
        self.folders = [lsp.WorkspaceFolder(f.resolve().as_uri(), f.name) for f in folders]
        self.env = env
        self.version = 0

    async def start(self) -> None:
        server = [sys.executable, "-m", "lsp_server", "--log-level", "WARNING"]
        await self.client.start_io(*server, env=self.env)
        caps = lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=False))
        await self.client.initialize_async(
            lsp.InitializeParams(capabilities=caps, initialization_options=self.settings,
                                 workspace_folders=self.folders or None)
        )  # fmt: skip
        self.client.initialized(lsp.InitializedParams())
        deadline = time.monotonic() + 300
        while (s := await self.status())["state"] not in ("ready", "failed"):
            if time.monotonic() > deadline:
                raise RuntimeError("the language server's model did not load")
            await asyncio.sleep(0.05)
        if s["state"] == "failed":
            raise RuntimeError(f"the language server's model failed to load: {s.get('error')}")
        while self.folders and (await self.status())["drafts"]["workspace"] is None:
            if time.monotonic() > deadline + WORKSPACE_SECONDS:
                raise RuntimeError("the language server's workspace index was not built")
            await asyncio.sleep(0.1)

    async def status(self) -> dict[str, Any]:
        return dict(plain(await self.client.protocol.send_request_async("dllm/status", None)))

    async def first(self, case: Case) -> str:
        """The first item of an invoked request at the hole ("" when none), the document
        opened for it and closed after (closing forgets the items kept for typing ahead)."""
        self.version += 1
        doc = lsp.TextDocumentItem(URI, "python", self.version, case.text)
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(doc))
        try:
            result = await self.client.text_document_inline_completion_async(
                lsp.InlineCompletionParams(
                    text_document=lsp.TextDocumentIdentifier(URI),
                    position=lsp.Position(case.line, case.column),
                    context=lsp.InlineCompletionContext(
                        trigger_kind=lsp.InlineCompletionTriggerKind.Invoked
                    ),
                )
            )
        finally:
            close = lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(URI))
            self.client.text_document_did_close(close)
        items = result.items if isinstance(result, lsp.InlineCompletionList) else result or []
        eol = case.text.find("\n", case.offset)
        rest = case.text[case.offset : len(case.text) if eol < 0 else eol]
        return _item_text(items[0], rest) if items else ""

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def request_body(route: str, case: Case) -> tuple[str, dict[str, Any]]:
    path, fields = ROUTES[route]
    if path == "/infill":
        return path, {"input_prefix": case.before, "input_suffix": case.after, **fields}
    if path == "/v1/completions":
        return path, {"prompt": case.before, "suffix": case.after, **fields}
    return path, {"text": case.text, "offset": case.offset, **fields}


async def _post(client: Any, route: str, case: Case) -> Any:
    """The route's JSON reply to the hole (an HTTP error raises)."""
    path, body = request_body(route, case)
    r = await client.post(path, json=body)
    r.raise_for_status()
    return r.json()


def answer_of(route: str, reply: Any) -> str:
    """The first text a route's reply answers ("" when it shows nothing)."""
    path = ROUTES[route][0]
    if path == "/infill":
        first = reply[0] if isinstance(reply, list) else reply
        return str(first["content"])
    if path == "/v1/completions":
        return str(reply["choices"][0]["text"]) if reply["choices"] else ""
    return str(reply["shown"][0]["text"]) if reply["shown"] else ""


@dataclass
class Answers:
    """Each hole's first text and round trip (ms), by route ("lsp": the language server)."""

    texts: dict[str, list[str]] = field(default_factory=dict)
    ms: dict[str, list[float]] = field(default_factory=dict)
    engine_ms: list[float | None] = field(default_factory=list)  # the server's engine call

    def add(self, route: str, text: str, ms: float) -> None:
        self.texts.setdefault(route, []).append(text)
        self.ms.setdefault(route, []).append(ms)


class Fill:
    """`dllm-infill fill`'s code in this process (cli_fill.fill_at, its default options), with
    its own engine; with `folders`, their index built as `fill` builds a workspace's."""

    def __init__(self, model: str, device: str, folders: Sequence[Path] = ()) -> None:
        from infill_engine import load
        from infill_engine.cli_fill import params_of, parser
        from infill_engine.workspace.index import WorkspaceIndex

        self.model = model
        self.engine = load(model, device=device)
        self.params = params_of(parser().parse_args(["-", "--line", "1", "--col", "1"]))
        self.index: WorkspaceIndex | None = None
        if folders:
            self.index = WorkspaceIndex(max_seconds=WORKSPACE_SECONDS)
            self.index.build(list(folders))

    def first(self, case: Case) -> str:
        from infill_engine.cli_fill import fill_at

        index = self.index
        carried = [] if index is None else index.drafts(URI, case.text, case.offset)
        shown = fill_at(self.engine, case.text, case.offset, "python", self.params, self.model,
                        carried)  # fmt: skip
        return shown.text


async def ask_all(
    cases: Sequence[Case],
    routes: Sequence[str] = ALL_ROUTES,
    model: str = "builtin",
    device: str = "cpu",
    progress: bool = False,
    workspace: Sequence[Path] = (),
) -> tuple[Answers, dict[str, Any]]:
    """Every hole asked of the language server, of each route of one engine service, and of
    `fill` in this process; the answers, and where they ran (with `workspace`, the folders'
    index on both sides)."""
    import httpx

    from infill_engine import load
    from infill_engine.scheduler import Scheduler
    from infill_engine.service import Service, ServiceThread, parse_address

    token = secrets.token_hex(16)
    engine = load(model, device=device)
    service = Service(engine, model, token, scheduler=Scheduler(engine.live_batch, max_batch=8))
    answers = Answers()
    http_routes = [r for r in routes if r in ROUTES]
    filler = Fill(model, device, workspace) if "fill" in routes else None
    with tempfile.TemporaryDirectory(prefix="dllm-eval-routes-") as state:
        env = {**os.environ, "XDG_STATE_HOME": state}  # not the user's acceptance counts
        server = Lsp(model, device, env, workspace)
        try:
            with ServiceThread(service, parse_address("http://127.0.0.1:0")) as http:
                assert http.bound is not None
                base = f"http://127.0.0.1:{http.bound.port}"
                headers = {"Authorization": f"Bearer {token}"}
                await server.start()
                async with httpx.AsyncClient(base_url=base, headers=headers, timeout=300) as c:
                    # one untimed round each: the first request pays for warm-ups
                    await server.first(cases[0])
                    for route in http_routes:
                        await _post(c, route, cases[0])
                    if filler is not None:
                        filler.first(cases[0])
                    bar = _bar(len(cases), progress)
                    for case in cases:
                        calls = (await server.status())["model_calls"]
                        t0 = time.perf_counter()
                        text = await server.first(case)
                        answers.add("lsp", text, (time.perf_counter() - t0) * 1000)
                        s = await server.status()  # the engine's own time, outside the timing
                        ran = s["model_calls"] > calls and isinstance(s.get("last"), dict)
                        answers.engine_ms.append(float(s["last"]["call_ms"]) if ran else None)
                        for route in http_routes:
                            t0 = time.perf_counter()
                            reply = await _post(c, route, case)
                            ms = (time.perf_counter() - t0) * 1000
                            answers.add(route, answer_of(route, reply), ms)
                        if filler is not None:
                            t0 = time.perf_counter()
                            text = filler.first(case)
                            answers.add("fill", text, (time.perf_counter() - t0) * 1000)
                        bar(1)
                    bar(0)
                s = await server.status()
                where = {"lsp": s.get("device"), "service": str(engine.device)}
                if workspace:
                    ours = filler.index.status() if filler and filler.index else None
                    where["workspace"] = {"lsp": s["drafts"]["workspace"], "fill": ours}
        finally:
            try:
                await server.stop()
            finally:
                engine.close()
                if filler is not None:
                    filler.engine.close()
    return answers, where


def _bar(total: int, on: bool) -> Callable[[int], None]:
    """A tqdm bar on stderr (when `on`): called with 1 for each hole, with 0 at the end."""
    if not on:
        return lambda _: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc="holes", unit="hole", file=sys.stderr)

    def step(k: int) -> None:
        if k:
            bar.update(k)
        else:
            bar.close()

    return step


# -- the report --------------------------------------------------------------------------------


def _pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


def figures(cases: Sequence[Case], texts: Sequence[str], lsp_texts: Sequence[str] | None,
            ms: Sequence[float]) -> dict[str, Any]:  # fmt: skip
    """One route's figures (the language server's own when `lsp_texts` is None)."""
    n = len(cases)
    out: dict[str, Any] = {
        "holes": n,
        "answered": sum(bool(t) for t in texts),
        "adds_syntax_error": sum(c.breaks(t) for c, t in zip(cases, texts, strict=True)),
        # of those, where the document with the hole compiled too: the answer alone broke it
        "adds_syntax_error_hole_compiled": sum(
            c.breaks(t) and c.hole_compiles for c, t in zip(cases, texts, strict=True)
        ),
        "exact": sum(c.exact(t) for c, t in zip(cases, texts, strict=True)),
    }
    out["exact_pct"] = _pct(out["exact"], n)
    if lsp_texts is not None:
        pairs = list(zip(texts, lsp_texts, strict=True))
        shown = [(t, s) for t, s in pairs if s]
        out["agree"] = sum(t == s for t, s in pairs)
        out["disagree"] = n - out["agree"]
        out["agree_pct"] = _pct(out["agree"], n)
        out["lsp_shown"] = len(shown)
        out["agree_shown"] = sum(t == s for t, s in shown)
        out["agree_shown_pct"] = _pct(out["agree_shown"], len(shown))
    out["p50_ms"] = round(statistics.median(ms), 1) if ms else None
    return out


def reason(route: str, i: int, case: Case, answers: Answers) -> str:
    """Why a route's answer at hole i is not the server's, read from the other routes."""
    lsp_text, t = answers.texts["lsp"][i], answers.texts[route][i]
    twin = TWINS.get(route)
    if route == "infill_raw":
        return "raw: the model's own text, not finished or ranked"
    if route == "fill":
        return "fill: " + ("the server showed nothing, fill did" if not lsp_text else
                           "fill showed nothing, the server did" if not t else
                           "different texts (fill asks one fill, the server 3)")  # fmt: skip
    if route == "infill_guess":
        import grammars

        guessed = grammars.guess(case.text, case.offset) or "plaintext"
        if guessed != "python":
            return f"language: guessed {guessed!r}, not python"
        if "infill" in answers.texts and answers.texts["infill"][i] == t:
            route = "infill"  # the same as with languageId: read as that route
            twin = TWINS[route]
    if twin and twin in answers.texts and answers.texts[twin][i] == lsp_text:
        return "candidates: 1 fill asked, the server asks 3 (its 3-candidate twin agrees)"
    if not t:
        return "the route showed nothing, the server did"
    if not lsp_text:
        return "the server showed nothing, the route did"
    return "other: different texts from the same request shape"


def report(cases: Sequence[Case], answers: Answers, eligible: int,
           extra: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    lsp_texts = answers.texts.get("lsp", [])
    out: dict[str, Any] = {
        **(extra or {}),
        "holes": len(cases),
        "files": len({c.origin for c in cases}),
        "eligible_files": eligible,
        "originals_compiling": sum(c.compiles for c in cases),
        "lsp": figures(cases, lsp_texts, None, answers.ms.get("lsp", [])),
        "routes": {},
        "disagreements": {},
    }
    for route, texts in answers.texts.items():
        if route == "lsp":
            continue
        out["routes"][route] = figures(cases, texts, lsp_texts, answers.ms[route])
        if out["routes"][route]["disagree"]:
            listed: list[dict[str, Any]] = []
            reasons: dict[str, int] = {}
            for i, case in enumerate(cases):
                if texts[i] == lsp_texts[i]:
                    continue
                why = reason(route, i, case, answers)
                kind = why.split(":", 1)[0]
                reasons[kind] = reasons.get(kind, 0) + 1
                if len(listed) < SHOW_DISAGREEMENTS:
                    listed.append({"origin": case.origin, "line": case.line + 1,
                                   "truth": case.truth, "lsp": lsp_texts[i], "route": texts[i],
                                   "reason": why})  # fmt: skip
            under = out["routes"][route]["agree"] < AGREEMENT_WANTED * len(cases)
            out["disagreements"][route] = {"under_95": under, "reasons": reasons, "first": listed}
    engine = [m for m in answers.engine_ms if m is not None]
    out["lsp"]["engine_p50_ms"] = round(statistics.median(engine), 1) if engine else None
    out["cases"] = [
        {"origin": c.origin, "line": c.line + 1, "truth": c.truth, "compiles": c.compiles,
         "hole_compiles": c.hole_compiles,
         "answers": {r: answers.texts[r][i] for r in answers.texts}}
        for i, c in enumerate(cases)
    ]  # fmt: skip
    return out


def evaluate(
    folders: Sequence[Path],
    holes: int = 100,
    seed: int = 0,
    model: str = "builtin",
    device: str = "cpu",
    all_files: bool = False,
    routes: Sequence[str] = ALL_ROUTES,
    progress: bool = False,
    workspace: bool = False,
) -> dict[str, Any]:
    """The whole measurement: cut, ask both servers and `fill`, report (`workspace`: the
    folders are the workspace of the language server and of `fill`)."""
    cases, eligible = cut_holes(folders, holes, seed, all_files)
    if not cases:
        raise ValueError("no file under the folders gives a hole (held out, <= 2,000 lines)")
    t0 = time.perf_counter()
    folders_read = list(folders) if workspace else []
    answers, where = asyncio.run(ask_all(cases, routes, model, device, progress, folders_read))
    extra = {"model": model, "seed": seed, "folders": [str(f) for f in folders], **where,
             "workspace_read": workspace,
             "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    return report(cases, answers, eligible, extra)


def _cell(v: Any) -> str:
    return "-" if v is None else str(v)


def print_report(out: dict[str, Any]) -> None:
    print(
        f"eval-routes: {out['holes']} holes from {out['files']} files "
        f"({out['eligible_files']} eligible), {out['model']}, {out['seconds']} s"
    )
    head = ("route", "holes", "syntax+", "agree %", "agree|shown %", "exact %", "p50 ms")
    print("".join(f"{h:>16}" for h in head))
    rows = [("lsp", {**out["lsp"], "agree_pct": 100.0, "agree_shown_pct": 100.0})]
    for route, f in [*rows, *out["routes"].items()]:
        cells = (route, f["holes"], f["adds_syntax_error"], f["agree_pct"],
                 f["agree_shown_pct"], f["exact_pct"], f["p50_ms"])  # fmt: skip
        print("".join(f"{_cell(c):>16}" for c in cells))
    print(f"the language server's engine call alone: p50 {_cell(out['lsp']['engine_p50_ms'])} ms")
    for route, d in out["disagreements"].items():
        under = f"under {AGREEMENT_WANTED:.0%} agreement" if d["under_95"] else "disagreements"
        print(f"\n{route}: {under}; reasons {d['reasons']}")
        for x in d["first"]:
            print(f"  {x['origin']}:{x['line']}  truth {x['truth']!r}")
            print(f"    lsp   {x['lsp']!r}\n    route {x['route']!r}\n    why   {x['reason']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="eval-routes", description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--holes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--all-files", action="store_true", help="also files the model trained on")
    ap.add_argument("--routes", default=",".join(ALL_ROUTES), help="comma-separated, of: " +
                    ", ".join(ALL_ROUTES))  # fmt: skip
    ap.add_argument(
        "--workspace",
        action="store_true",
        help="the folders are the workspace of the language server and of fill",
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    routes = [r for r in a.routes.split(",") if r]
    if unknown := set(routes) - set(ALL_ROUTES):
        ap.error(f"unknown routes {sorted(unknown)}")
    if a.holes < 1:
        ap.error(f"--holes must be >= 1, got {a.holes}")
    try:
        out = evaluate(a.folders, a.holes, a.seed, a.model, a.device, a.all_files, routes,
                       progress=True, workspace=a.workspace)  # fmt: skip
    except (OSError, RuntimeError, ValueError) as e:
        print(f"eval-routes: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(out, allow_nan=False))
    else:
        print_report(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
