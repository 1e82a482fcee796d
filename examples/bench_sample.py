"""A small inventory module: the sample file that `dllm-infill bench-lsp` completes in."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 0
    tags: list[str] = field(default_factory=list)

    def total(self) -> float:
        return self.price * self.quantity

    def is_available(self) -> bool:
        return self.quantity > 0


class Inventory:
    def __init__(self) -> None:
        self.items: dict[str, Item] = {}

    def add(self, item: Item) -> None:
        if item.name in self.items:
            self.items[item.name].quantity += item.quantity
        else:
            self.items[item.name] = item

    def remove(self, name: str, quantity: int = 1) -> bool:
        item = self.items.get(name)
        if item is None or item.quantity < quantity:
            return False
        item.quantity -= quantity
        return True

    def value(self) -> float:
        return sum(item.total() for item in self.items.values())

    def tagged(self, tag: str) -> list[Item]:
        return [item for item in self.items.values() if tag in item.tags]

    def cheapest(self) -> Item | None:
        available = [item for item in self.items.values() if item.is_available()]
        if not available:
            return None
        return min(available, key=lambda item: item.price)

    def save(self, path: Path) -> None:
        data = [
            {"name": i.name, "price": i.price, "quantity": i.quantity, "tags": i.tags}
            for i in self.items.values()
        ]
        path.write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, path: Path) -> Inventory:
        inventory = cls()
        for row in json.loads(path.read_text()):
            inventory.add(Item(**row))
        return inventory


def parse_price(text: str) -> float:
    text = text.strip().lstrip("$")
    if not text:
        raise ValueError("empty price")
    return round(float(text), 2)


def restock(inventory: Inventory, names: list[str], amount: int) -> int:
    count = 0
    for name in names:
        item = inventory.items.get(name)
        if item is not None:
            item.quantity += amount
            count += 1
    return count


def report(inventory: Inventory) -> str:
    lines = []
    for item in sorted(inventory.items.values(), key=lambda i: i.name):
        lines.append(f"{item.name:20} {item.quantity:5} {item.total():10.2f}")
    lines.append(f"{'total':20} {'':5} {inventory.value():10.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    stock = Inventory()
    stock.add(Item("apple", 0.5, 10, ["fruit"]))
    stock.add(Item("bread", 2.25, 3, ["bakery"]))
    print(report(stock))
