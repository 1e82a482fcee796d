// An event queue, written to exercise the grammar queries.
export enum Priority {
  Low,
  High,
}

export interface Task {
  id: number;
  priority: Priority;
  run(): Promise<void>;
}

export abstract class Queue<T extends Task> {
  protected items: T[] = [];

  abstract accepts(task: T): boolean;

  push(task: T): void {
    if (!this.accepts(task)) {
      return;
    }
    this.items.push(task);
    this.items.sort((a, b) => b.priority - a.priority);
  }

  async drain(): Promise<number> {
    let done = 0;
    for (const task of this.items) {
      await task.run();
      done += 1;
    }
    this.items = [];
    return done;
  }

  onIdle(): void {}
}

export class AnyQueue extends Queue<Task> {
  accepts = (task: Task): boolean => {
    return task.id >= 0;
  };
}

export function makeTask(id: number): Task {
  return { id, priority: Priority.Low, run: async () => {} };
}
