import type { ObjectStore } from "../../src/ports/object-store.js";

/** A point a test holds closed until it decides to let the operation go on. */
export class Gate {
  #open!: () => void;
  readonly #opened: Promise<void>;
  #reached = 0;
  #onReach: Array<() => void> = [];

  constructor() {
    this.#opened = new Promise((resolve) => (this.#open = resolve));
  }

  /** Times an operation arrived at the gate. */
  get reached(): number {
    return this.#reached;
  }

  /** Resolves once an operation is waiting at (or has passed) the gate. */
  whenReached(): Promise<void> {
    if (this.#reached > 0) return Promise.resolve();
    return new Promise((resolve) => this.#onReach.push(resolve));
  }

  async pass(): Promise<void> {
    this.#reached++;
    for (const resolve of this.#onReach.splice(0)) resolve();
    await this.#opened;
  }

  open(): void {
    this.#open();
  }
}

/**
 * An object store whose payload uploads wait at a gate: `gateFor(key)` names
 * the gate for a key, or undefined to let it through at once.
 */
export function gatedPayloadUploads(
  inner: ObjectStore,
  gateFor: (key: string) => Gate | undefined,
): ObjectStore {
  return {
    async createIfAbsent(key, body, options) {
      if (key.includes("/payloads/")) await gateFor(key)?.pass();
      return await inner.createIfAbsent(key, body, options);
    },
    replace: (key, body, options) => inner.replace(key, body, options),
    get: (key, range) => inner.get(key, range),
    getStream: (key) => inner.getStream(key),
    head: (key) => inner.head(key),
    list: (prefix, options) => inner.list(prefix, options),
    delete: (key) => inner.delete(key),
    uri: (key) => inner.uri(key),
  };
}
