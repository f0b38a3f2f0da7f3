/**
 * An object store opened on first use. Commands that never touch the archive
 * (`status`, `tables list`, `import`) then never load the AWS SDK, which
 * costs more start-up time than the rest of the CLI together.
 */
import type {
  ByteRange,
  CreateOptions,
  CreateResult,
  ListOptions,
  ListPage,
  ObjectBody,
  ObjectInfo,
  ObjectStore,
} from "../../ports/object-store.js";

export class LazyObjectStore implements ObjectStore {
  readonly #open: () => Promise<ObjectStore>;
  #store: Promise<ObjectStore> | undefined;

  constructor(open: () => Promise<ObjectStore>) {
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

  async createIfAbsent(
    key: string,
    body: ObjectBody,
    options?: CreateOptions,
  ): Promise<CreateResult> {
    return await (await this.#get()).createIfAbsent(key, body, options);
  }

  async get(key: string, range?: ByteRange): Promise<Uint8Array> {
    return await (await this.#get()).get(key, range);
  }

  async getStream(key: string): Promise<AsyncIterable<Uint8Array>> {
    return await (await this.#get()).getStream(key);
  }

  async head(key: string): Promise<ObjectInfo | null> {
    return await (await this.#get()).head(key);
  }

  async list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return await (await this.#get()).list(prefix, options);
  }

  async delete(key: string): Promise<void> {
    await (await this.#get()).delete(key);
  }

  async close(): Promise<void> {
    if (this.#store === undefined) return;
    const store = await this.#store.catch(() => undefined);
    await store?.close?.();
  }
}
