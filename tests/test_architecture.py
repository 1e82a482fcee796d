"""The code's shape, checked: no import circle between the project's modules (imports inside
functions count too: a lazy import that dodges a circle is still one), no source file of the
runtime over 450 lines (the lab, lab/dllm_lab, is offline tooling), and the runtime imports the
lab nowhere but in the command line's lab commands."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ("infill_engine", "lsp_server", "grammars")  # the dllm-infill wheel
LAB = ROOT / "lab"  # the dllm-infill-lab distribution: lab/dllm_lab
# package -> the folder that holds it
PACKAGES = {**{pkg: ROOT for pkg in RUNTIME}, "dllm_lab": LAB}


def modules() -> dict[str, Path]:
    out = {}
    for pkg, base in PACKAGES.items():
        for f in (base / pkg).rglob("*.py"):
            parts = f.relative_to(base).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def import_graph() -> dict[str, set[str]]:
    mods = modules()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join([*base, node.module] if node.module else base)
                if not node.level:
                    stem = node.module or ""
                names = [
                    f"{stem}.{a.name}" if f"{stem}.{a.name}" in mods else stem for a in node.names
                ]
            for name in names:
                target = owner(name)
                if target is not None and target != mod:
                    graph[mod].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "infill_engine.request" in graph["infill_engine.scheduler"]  # it reads real imports
    assert "infill_engine.lexer" in graph["infill_engine.stop"]  # `from . import lexer`
    assert "infill_engine.engine" in graph["dllm_lab.bench"]  # it sees the lab too


def test_no_import_circle() -> None:
    assert circles(import_graph()) == []


def test_the_runtime_imports_the_lab_only_in_its_lab_commands() -> None:
    """The runtime wheel runs without the lab installed: only infill_engine.cli names it (and
    imports it inside its lab commands, with a word where it is absent)."""
    importers = {
        mod
        for mod, targets in import_graph().items()
        if not mod.startswith("dllm_lab") and any(t.startswith("dllm_lab") for t in targets)
    }
    assert importers == {"infill_engine.cli"}


MAX_LINES = 450  # a file past this holds more than one concept; the lab is offline tooling


def test_no_source_file_of_the_runtime_is_over_the_limit() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in modules().values()
        if not path.is_relative_to(LAB)
    }
    assert len(sizes) > 50  # it sees the project
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_language_server_loads_no_http_service() -> None:
    """Importing the language server (its server and its command line) loads neither the
    service's HTTP front (starlette, uvicorn) nor its metrics (prometheus_client): it shares
    only the service's small pieces (addresses, frames, the wire) with it."""
    import subprocess
    import sys

    heavy = ("starlette", "uvicorn", "prometheus_client", "infill_engine.service.http")
    code = (
        "import sys, lsp_server.protocol.handlers, lsp_server.cli; "
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == ""


def test_the_language_server_s_rooms_import_one_way() -> None:
    """lsp_server's rooms (its subpackages and top-level modules) form no circle either, and
    its top level stays small: at most 10 entries."""
    rooms: dict[str, set[str]] = {}
    for mod, targets in import_graph().items():
        if mod.startswith("lsp_server."):
            room = ".".join(mod.split(".")[:2])
            rooms.setdefault(room, set()).update(
                ".".join(t.split(".")[:2]) for t in targets if t.startswith("lsp_server.")
            )
    for room, targets in rooms.items():
        targets.discard(room)
        targets &= set(rooms)
    assert circles(rooms) == []
    top = [p.name for p in (ROOT / "lsp_server").iterdir() if p.name != "__pycache__"]
    assert len(top) <= 10, sorted(top)
