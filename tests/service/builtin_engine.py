"""The builtin model's engine on the CPU, as the service tests share it: one pytest fixture,
`engine`, loaded once per test module that imports it (`from builtin_engine import engine`) and
closed after that module's last test, its scheduler's and watchdog's threads with it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infill_engine import Engine, load


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = load("builtin", device="cpu")
    yield e
    e.close()
