"""Python's names for a draft: does a line copied from elsewhere read a name that nothing binds
where it would land (`reads_unbound`)?

A draft is a line found elsewhere in the code (drafts/). Its names say where it belongs: `return
s` where no `s` is bound, `self.maxBytes = maxBytes` in a method whose parameters hold no
`maxBytes`, `hlist = hlist.split(",")` in the function that splits `flist`. Run, each raises
NameError; the compiler accepts them all (a name is looked up when the line runs), so the compile
step (compiles.py) lets them through. Read on the standard library's calibration holes, such
lines were a tenth of the wrong drafts the gate showed.

The check reads the block the compile step compiles (compiles.Block: the top-level statement or
method around the insertion), twice: with the draft, and with the draft's line replaced by
`pass`. CPython's symbol table (`symtable`, compiled only, never run) names, in each, the names
read in some scope that no scope of the block binds (globals, implicitly). The names the draft
adds to those must be bound at the document's top level (`top_level_names`: every name written
in its top-level code outside function and class bodies, so an import, an assignment or a
`for` target there binds it; and every name a `global` statement declares), or be a builtin. A
block that does not compile either way, a document with a `from ... import *`, and a draft
that reads no new name pass: the check rejects only what it can see is unbound.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
import threading
import warnings
from collections import OrderedDict
from functools import lru_cache

from tree_sitter import Node

from .compiles import Block

# Names a module has without binding them: the builtins, the module's own attributes, and `_`
# (gettext.install puts it among the builtins).
_ALWAYS = frozenset(dir(builtins)) | {
    "__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__path__",
    "__builtins__", "__annotations__", "__dict__", "__class__", "_",
}  # fmt: skip
_GLOBAL = re.compile(r"^[ \t]*global[ \t]+([\w \t,]+)", re.MULTILINE)
_BODIES = frozenset({"function_definition", "class_definition"})


def reads_unbound(block: Block, text: str, root: Node | None, document: bytes) -> bool:
    """Whether `text`, put in place of what `block` replaces, reads a name that neither the
    block nor the top level of `document` (parsed as `root`) binds, nor the builtins. The top
    level is read only when the text reads a name the block leaves unbound."""
    with_text = block.header + block.before + text + block.after
    start = block.before.rfind("\n") + 1
    line = block.before[start:]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    rest = block.after.split("\n", 1)
    without = block.header + block.before[:start] + indent + "pass"
    without += "\n" + rest[1] if len(rest) > 1 else ""
    new, old = _names(with_text), _names(without)
    if new is None or old is None:
        return False
    # What only the draft binds, and reads on the same line (`x = x.split()`): unbound when read.
    own = _reads_own(line.strip() + text.split("\n", 1)[0]) - old[1]
    fresh = (new[0] - old[0] - _ALWAYS) | own
    if not fresh or root is None:
        return False
    top = top_level_names(root, document)
    return top is not None and bool(fresh - top)


def _table(source: str) -> symtable.SymbolTable | None:
    """The symbol table of source, compiled only (None: it does not compile)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return symtable.symtable(source, "<draft>", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return None


@lru_cache(maxsize=16)
def _names(source: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """The names read in some scope of `source` that no scope of it binds, and every name of
    every scope (None: it does not compile)."""
    table = _table(source)
    if table is None:
        return None
    read: set[str] = set()
    bound: set[str] = set()
    every: set[str] = set()
    tables = [table]
    while tables:
        t = tables.pop()
        tables.extend(t.get_children())
        for s in t.get_symbols():
            every.add(s.get_name())
            if s.is_declared_global() or (t.get_type() == "module" and s.is_local()):
                bound.add(s.get_name())
            elif s.is_referenced() and s.is_global() and not s.is_local():
                read.add(s.get_name())
    return frozenset(read - bound), frozenset(every)


def _reads_own(line: str) -> frozenset[str]:
    """The names a statement both binds and reads in its own scope (a comprehension's variables
    are its own scope's; `x += 1` reads x): a block's head gets a `pass` to stand alone."""
    source = line + (" pass" if line.endswith(":") else "")
    table = _table(source)
    if table is None:
        return frozenset()
    own = {s.get_name() for s in table.get_symbols() if s.is_referenced() and s.is_assigned()}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    return frozenset(own)


def forget() -> None:
    """Drop the blocks and documents the caches hold (syntax.forget_documents)."""
    _names.cache_clear()
    top_level_names.cache_clear()
    _STATEMENTS.clear()


@lru_cache(maxsize=4)  # one document's, for all the drafts of its requests
def top_level_names(root: Node, text: bytes) -> frozenset[str] | None:
    """Every name written in the top-level code of a Python document `text` (parsed as `root`)
    outside function and class bodies (a definition's own name too), and every name a `global`
    statement declares: more than it binds, never less. None where a star import may bind any
    name. Each top-level statement is read once (`_STATEMENTS`): between two requests the user
    changed one, and the tree handed over is a new copy each time."""
    names: set[str] = set()
    for node in root.children:
        found = _STATEMENTS.names(node, text)
        if found is None:
            return None
        names |= found
    for m in _GLOBAL.finditer(text.decode("utf-8", "replace")):
        names.update(n for n in re.split(r"[\s,]+", m.group(1)) if n)
    return frozenset(names)


def _statement_names(statement: Node, text: bytes) -> frozenset[str] | None:
    """The names one top-level statement writes outside function and class bodies (None: a
    star import)."""
    names: set[str] = set()
    nodes = [statement]
    while nodes:
        node = nodes.pop()
        if node.type == "wildcard_import":
            return None
        if node.type == "identifier":
            names.add(text[node.start_byte : node.end_byte].decode("utf-8", "replace"))
        elif node.type in _BODIES:
            name = node.child_by_field_name("name")
            nodes.extend([name] if name is not None else [])
            nodes.extend(c for c in node.children if c.type != "block")
        else:
            nodes.extend(node.children)
    return frozenset(names)


class _Statements:
    """`_statement_names` by the statement's type and bytes, the least recently used dropped
    past `max_bytes` of statements held. The unchanged ones cost a lookup each: for the
    standard library's typing.py (3,400 lines) the names took 8.3 ms, and take 2.5 ms once one
    statement changed; `examples/bench_sample.py` 300 times over (29,100 lines, 300 top-level
    `if` blocks) took 90 ms a request, and takes 12."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._held: OrderedDict[tuple[str, bytes], frozenset[str] | None] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # syntax checks run on worker threads

    def names(self, statement: Node, text: bytes) -> frozenset[str] | None:
        key = (statement.type, text[statement.start_byte : statement.end_byte])
        with self._lock:
            if key in self._held:
                self._held.move_to_end(key)
                return self._held[key]
        found = _statement_names(statement, text)
        with self._lock:
            if key not in self._held:
                self._held[key] = found
                self._bytes += len(key[1])
            while self._bytes > self.max_bytes and len(self._held) > 1:
                self._bytes -= len(self._held.popitem(last=False)[0][1])
        return found

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
            self._bytes = 0


_STATEMENTS = _Statements(8 << 20)  # a few documents' top levels
