/**
 * An object store that hands every call to another one. Decorators (a store
 * opened on first use, the soak's sabotages) extend it and override only
 * what they change, so a method added to the port is forwarded everywhere
 * by writing it once, here.
 */
import type * as port from "../../ports/object-store.js";

export class ForwardingObjectStore implements port.ObjectStore {
  /** `inner` is the store itself, or how to reach it (opened on first use, say). */
  constructor(private readonly inner: port.ObjectStore | (() => Promise<port.ObjectStore>)) {}

  /** The store calls go to. */
  protected target(): Promise<port.ObjectStore> {
    const inner = this.inner;
    return typeof inner === "function" ? inner() : Promise.resolve(inner);
  }

  async createIfAbsent(
    key: string,
    body: port.ObjectBody,
    options?: port.CreateOptions,
  ): Promise<port.CreateResult> {
    return await (await this.target()).createIfAbsent(key, body, options);
  }

  async replace(key: string, body: Uint8Array, options?: port.CreateOptions): Promise<void> {
    await (await this.target()).replace(key, body, options);
  }

  async get(key: string, range?: port.ByteRange, options?: port.CallOptions): Promise<Uint8Array> {
    return await (await this.target()).get(key, range, options);
  }

  async getStream(key: string, options?: port.CallOptions): Promise<AsyncIterable<Uint8Array>> {
    return await (await this.target()).getStream(key, options);
  }

  async head(key: string, options?: port.HeadOptions): Promise<port.ObjectInfo | null> {
    return await (await this.target()).head(key, options);
  }

  async list(prefix: string, options?: port.ListOptions): Promise<port.ListPage> {
    return await (await this.target()).list(prefix, options);
  }

  async delete(key: string, options?: port.DeleteOptions): Promise<void> {
    await (await this.target()).delete(key, options);
  }

  async uri(key: string): Promise<string> {
    return await (await this.target()).uri(key);
  }

  async storageChecksumFor(byteLength: number): Promise<port.StorageChecksum | undefined> {
    return await (await this.target()).storageChecksumFor?.(byteLength);
  }

  async close(): Promise<void> {
    await (await this.target()).close?.();
  }
}
