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
import warnings
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


@lru_cache(maxsize=4)  # one document's, for all the drafts of its requests
def top_level_names(root: Node, text: bytes) -> frozenset[str] | None:
    """Every name written in the top-level code of a Python document `text` (parsed as `root`)
    outside function and class bodies (a definition's own name too), and every name a `global`
    statement declares: more than it binds, never less. None where a star import may bind any
    name."""
    names: set[str] = set()
    nodes = list(root.children)
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
    for m in _GLOBAL.finditer(text.decode("utf-8", "replace")):
        names.update(n for n in re.split(r"[\s,]+", m.group(1)) if n)
    return frozenset(names)
