import type { QueueDepth, WorkItem, WorkQueue } from "../../ports/work-queue.js";

function identity(item: WorkItem): string {
  return `${item.tableId}\u0000${Buffer.from(item.partitionKey).toString("base64")}\u0000${item.bucketKey}`;
}

/**
 * The work queue of the standalone and embedded runners. An item already
 * waiting or being worked on is not queued twice, so frequent discovery
 * scans cannot flood it.
 */
export class InProcessWorkQueue implements WorkQueue {
  readonly #items: WorkItem[] = [];
  readonly #known = new Set<string>();
  readonly #waiters: Array<(item: WorkItem | undefined) => void> = [];
  #closed = false;

  async send(item: WorkItem): Promise<void> {
    if (this.#closed) return;
    const key = identity(item);
    if (this.#known.has(key)) return;
    this.#known.add(key);
    const waiter = this.#waiters.shift();
    if (waiter) waiter(item);
    else this.#items.push(item);
  }

  async sendBatch(items: readonly WorkItem[]): Promise<void> {
    for (const item of items) await this.send(item);
  }

  /** Next item, waiting if none; undefined once the queue is closed. */
  async take(): Promise<WorkItem | undefined> {
    const item = this.#items.shift();
    if (item !== undefined || this.#closed) return item;
    return await new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Next item if one is waiting, without blocking. */
  poll(): WorkItem | undefined {
    return this.#items.shift();
  }

  /** Mark an item finished so it can be queued again. */
  done(item: WorkItem): void {
    this.#known.delete(identity(item));
  }

  get waiting(): number {
    return this.#items.length;
  }

  /** Items are hidden from nobody: taken items stay in flight until {@link done}. */
  async depth(): Promise<QueueDepth> {
    return {
      waiting: this.#items.length,
      inFlight: this.#known.size - this.#items.length,
      visibilityTimeoutSeconds: 0,
    };
  }

  /** Wake all waiting takers with undefined and refuse further items. */
  close(): void {
    this.#closed = true;
    for (const waiter of this.#waiters.splice(0)) waiter(undefined);
  }
}
