// A counter component, written to exercise the grammar queries.
import { useState } from "react";

interface CounterProps {
  start: number;
  label?: string;
}

export function Counter({ start, label = "Count" }: CounterProps) {
  const [value, setValue] = useState<number>(start);
  const increment = () => {
    setValue((v) => v + 1);
  };
  return (
    <button onClick={increment}>
      {label}: {value}
    </button>
  );
}

export const Empty = (): null => {
  return null;
};

function noop(): void {}
