"""A package's names imported on first use: its `__getattr__` and `__dir__` (PEP 562), so that
importing the package loads none of its modules until a name is asked for. The engine's package
(no torch model until `load`) and the service's (no HTTP stack for the language server, which
imports a few of its small modules) both use it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    package: str, homes: Mapping[str, str], names: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`: each name of `homes` comes from the module
    it names (relative to the package) when first asked for, and stays in the package after."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{home}", package), name)
        vars(sys.modules[package])[name] = value  # later lookups find it without coming here
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
