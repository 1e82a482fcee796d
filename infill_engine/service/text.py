"""What text the service takes: Unicode that can be encoded as UTF-8, and nothing else.

JSON can spell a lone surrogate (`"\\ud800"`), and msgpack can carry bytes that are not UTF-8;
neither is text, and the tokenizer fails on them deep inside the engine. Each front checks a
request once, right where it is decoded (the HTTP body in http.py, every msgpack payload in
frames.py), with `unicode_fault`: the first key or string of the request, at any depth, that is
not text names the field of the 400 (or the msgpack front's `bad_request`). Nothing is replaced
on the service: a client that sends a broken string hears which one, where the language server,
whose documents come from an editor it cannot refuse, reads them with U+FFFD instead.

msgpack strings are decoded with `surrogateescape`, so that a byte that is not UTF-8 arrives here
as a lone surrogate (U+DC80 to U+DCFF) and is named like one, instead of failing the whole frame.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_DEPTH = 64  # deeper requests are refused by their parsers anyway; the walk stops here


def unicode_fault(value: Any, path: str = "") -> str | None:
    """Why `value` (a decoded request: maps, lists, strings, numbers) is not all text: the field's
    path and the first bad character, as a one-line message; None when it is all text."""
    fault = _walk(value, path, 0)
    return None if fault is None else fault[:400]


def _bad(s: str) -> str | None:
    found = _SURROGATE.search(s)
    if found is None:
        return None
    return (
        "is not valid Unicode text: a lone surrogate or a byte that is not UTF-8 "
        f"(U+{ord(found.group()):04X}) at character {found.start()}"
    )


def _walk(value: Any, path: str, depth: int) -> str | None:
    if isinstance(value, str):
        why = _bad(value)
        return None if why is None else f"{path or 'the body'} {why}"
    if depth >= MAX_DEPTH:
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            name = key if isinstance(key, str) else repr(key)
            if (why := _bad(name)) is not None:
                return f"a field name in {path or 'the body'} {why}"
            if fault := _walk(item, f"{path}.{name}" if path else name, depth + 1):
                return fault
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if fault := _walk(item, f"{path}[{i}]", depth + 1):
                return fault
    return None
