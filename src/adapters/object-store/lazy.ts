/**
 * An object store opened on first use. Commands that never touch the archive
 * (`status`, `tables list`, `import`) then never load the AWS SDK, which
 * costs more start-up time than the rest of the CLI together.
 */
import type { ObjectStore } from "../../ports/object-store.js";
import { ForwardingObjectStore } from "./forwarding.js";

export class LazyObjectStore extends ForwardingObjectStore {
  readonly #open: () => Promise<ObjectStore>;
  #store: Promise<ObjectStore> | undefined;

  constructor(open: () => Promise<ObjectStore>) {
    super(() => this.#get());
    this.#open = open;
  }

  /** Whether the underlying store was opened (tests and start-up measurements). */
  get opened(): boolean {
    return this.#store !== undefined;
  }

  #get(): Promise<ObjectStore> {
    // A failed open is forgotten so the next call tries again.
    this.#store ??= this.#open().catch((error: unknown) => {
      this.#store = undefined;
      throw error;
    });
    return this.#store;
  }

  override async close(): Promise<void> {
    if (this.#store === undefined) return;
    const store = await this.#store.catch(() => undefined);
    await store?.close?.();
  }
}
