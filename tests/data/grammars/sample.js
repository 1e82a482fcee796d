// Shopping cart helpers, written to exercise the grammar queries.
import { formatPrice } from "./format.js";

const TAX_RATE = 0.2;

export class Cart {
  constructor(owner) {
    this.owner = owner;
    this.items = [];
  }

  add(item, quantity = 1) {
    if (quantity <= 0) {
      throw new Error("quantity must be positive");
    }
    this.items.push({ ...item, quantity });
  }

  clear() {}
}

export function total(cart) {
  let sum = 0;
  for (const item of cart.items) {
    sum += item.price * item.quantity;
  }
  return sum * (1 + TAX_RATE);
}

const summary = (cart) => {
  const lines = cart.items.map((item) => `${item.name}: ${formatPrice(item.price)}`);
  return lines.join("\n");
};

function* ids() {
  let next = 0;
  while (true) {
    yield next++;
  }
}

setTimeout(function () {
  console.log(summary(new Cart("me")));
}, 10);
