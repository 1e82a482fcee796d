"""Inventory helpers: a small module to exercise the grammar queries."""

import json
from dataclasses import dataclass


@dataclass
class Item:
    name: str
    count: int = 0

    def restock(self, amount: int) -> None:
        """Add amount to the count."""
        if amount < 0:
            raise ValueError("negative amount")
        self.count += amount

    def describe(self) -> str:
        ...


def load(path: str) -> list[Item]:
    with open(path) as f:
        raw = json.load(f)
    key = lambda item: item["name"]
    return [Item(r["name"], r.get("count", 0)) for r in sorted(raw, key=key)]


def total(items: list[Item]) -> int:
    def count_of(item: Item) -> int:
        return item.count

    return sum(count_of(i) for i in items)


def todo():
    pass
