/**
 * An object store that hands every call to another one. Decorators (a store
 * opened on first use, the soak's sabotages) extend it and override only
 * what they change, so a method added to the port is forwarded everywhere
 * by writing it once, here.
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

export class ForwardingObjectStore implements ObjectStore {
  /** `inner` is the store itself, or how to reach it (opened on first use, say). */
  constructor(private readonly inner: ObjectStore | (() => Promise<ObjectStore>)) {}

  /** The store calls go to. */
  protected target(): Promise<ObjectStore> {
    const inner = this.inner;
    return typeof inner === "function" ? inner() : Promise.resolve(inner);
  }

  async createIfAbsent(
    key: string,
    body: ObjectBody,
    options?: CreateOptions,
  ): Promise<CreateResult> {
    return await (await this.target()).createIfAbsent(key, body, options);
  }

  async get(key: string, range?: ByteRange): Promise<Uint8Array> {
    return await (await this.target()).get(key, range);
  }

  async getStream(key: string): Promise<AsyncIterable<Uint8Array>> {
    return await (await this.target()).getStream(key);
  }

  async head(key: string): Promise<ObjectInfo | null> {
    return await (await this.target()).head(key);
  }

  async list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return await (await this.target()).list(prefix, options);
  }

  async delete(key: string): Promise<void> {
    await (await this.target()).delete(key);
  }

  async uri(key: string): Promise<string> {
    return await (await this.target()).uri(key);
  }

  async close(): Promise<void> {
    await (await this.target()).close?.();
  }
}
