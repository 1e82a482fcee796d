"""A small key-value store with a write-ahead log.

The store keeps its records in memory and appends every change to a log file, so a crash
loses nothing that was acknowledged. Usage:

    store = Store.open("data.log")
    store.put("answer", "42")
    assert store.get("answer") == "42"
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

DEFAULT_CONFIG = {"sync": True, "max_bytes": 1 << 20}


class StoreError(Exception):
    """Raised when the log cannot be read or written."""


@dataclass
class Record:
    key: str
    value: str
    version: int = 0
    tags: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One line for logs: the key, its version and its tags."""
        tags = ", ".join(self.tags) or "untagged"
        return "%(key)s v%(version)d [%(tags)s]" % {
            "key": self.key,
            "version": self.version,
            "tags": tags,
        }


class Store:
    """Records by key, backed by an append-only log.

    Every `put` and `delete` is written to the log before it is applied, so replaying the log
    from the start rebuilds the store exactly.
    """

    def __init__(self, path: str, config: dict | None = None) -> None:
        self.path = path
        self.config = dict(DEFAULT_CONFIG, **(config or {}))
        self.records: dict[str, Record] = {}
        self._log = None

    @classmethod
    def open(cls, path: str) -> Store:
        """The store saved at path, replayed from its log; an empty one if there is none."""
        store = cls(path)
        if os.path.exists(path):
            store.replay()
        store._log = open(path, "a", encoding="utf-8")
        return store

    def replay(self) -> None:
        """Apply every entry of the log, in order."""
        with open(self.path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError as e:
                    raise StoreError(f"{self.path}:{n}: not a log entry") from e
                self._apply(entry)

    def _apply(self, entry: dict) -> None:
        if entry["op"] == "put":
            old = self.records.get(entry["key"])
            version = old.version + 1 if old else 0
            self.records[entry["key"]] = Record(entry["key"], entry["value"], version)
        elif entry["op"] == "delete":
            self.records.pop(entry["key"], None)

    def _write(self, entry: dict) -> None:
        if self._log is None:
            raise StoreError("the store is closed")
        self._log.write(json.dumps(entry) + "\n")
        if self.config["sync"]:
            self._log.flush()
            os.fsync(self._log.fileno())

    def put(self, key: str, value: str) -> Record:
        """Store value under key and return its record."""
        entry = {"op": "put", "key": key, "value": value}
        self._write(entry)
        self._apply(entry)
        return self.records[key]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return key in self.records

    def get(self, key: str, default: str | None = None) -> str | None:
        record = self.records.get(key)
        return record.value if record else default

    def delete(self, key: str) -> bool:
        """Remove key; False when it was not there."""
        if key not in self.records:
            return False
        entry = {"op": "delete", "key": key}
        self._write(entry)
        self._apply(entry)
        return True

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
