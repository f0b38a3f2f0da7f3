/**
 * The `adopt-orphans` sabotage: payload keys lose the export attempt that
 * issue 12 put in them. `…/payloads/{sha256}-g{n}-{tag}.{ext}` becomes
 * `…/payloads/{sha256}.{ext}` on every object operation of the soak's
 * archivers, and in the payload key they record, so metadata, manifests,
 * readers and GC all agree on the content-only name. Two attempts that
 * export the same bytes then share one object again: a later attempt adopts
 * (finds `already-exists`, verifies, records) an object that GC found
 * unreferenced and is deleting, and the delete lands after the adoption.
 * That is the data-loss race issue 12 closed; the fault soak must catch it.
 */
import type { HotStore } from "../../src/ports/hot-store.js";
import type {
  ByteRange,
  CreateOptions,
  CreateResult,
  ListOptions,
  ListPage,
  ObjectBody,
  ObjectInfo,
  ObjectStore,
} from "../../src/ports/object-store.js";

const ATTEMPT_NAMED = /\/payloads\/([0-9a-f]{64})-g\d+-[0-9a-f]{12}\.(parquet|json)$/;

export function contentOnlyKey(key: string): string {
  return key.replace(ATTEMPT_NAMED, "/payloads/$1.$2");
}

/** The object store with every payload key reduced to its content-only name. */
export class ContentOnlyPayloadStore implements ObjectStore {
  /** Creates that found the content-only object already there: adoptions. */
  adoptions = 0;

  constructor(
    private readonly inner: ObjectStore,
    private readonly onAdopt: (key: string) => void = () => {},
  ) {}

  async createIfAbsent(
    key: string,
    body: ObjectBody,
    options?: CreateOptions,
  ): Promise<CreateResult> {
    const mapped = contentOnlyKey(key);
    const result = await this.inner.createIfAbsent(mapped, body, options);
    if (result === "already-exists" && mapped !== key) {
      this.adoptions++;
      this.onAdopt(mapped);
    }
    return result;
  }

  get(key: string, range?: ByteRange): Promise<Uint8Array> {
    return this.inner.get(contentOnlyKey(key), range);
  }

  getStream(key: string): Promise<AsyncIterable<Uint8Array>> {
    return this.inner.getStream(contentOnlyKey(key));
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const info = await this.inner.head(contentOnlyKey(key));
    return info === null ? null : { ...info, key };
  }

  list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return this.inner.list(prefix, options);
  }

  delete(key: string): Promise<void> {
    return this.inner.delete(contentOnlyKey(key));
  }

  async close(): Promise<void> {
    await this.inner.close?.();
  }
}

/** The hot store recording the content-only payload key the sabotaged store wrote. */
export function recordingContentOnlyKeys(hot: HotStore): HotStore {
  return new Proxy(hot, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== "function") return value;
      if (property === "recordPart") {
        const recordPart = target.recordPart.bind(target);
        return ((lease, now, part) =>
          recordPart(lease, now, {
            ...part,
            key: contentOnlyKey(part.key),
          })) satisfies HotStore["recordPart"];
      }
      return (value as (...args: unknown[]) => unknown).bind(target);
    },
  });
}

/**
 * GC's object store under the sabotage: a payload delete is sent and left to
 * land whenever the stalled network delivers it, while GC carries on as if
 * it had returned: the delete that outlives GC's lease, without waiting for
 * a client timeout to end each pass.
 */
export class DetachedPayloadDeletes implements ObjectStore {
  readonly #pending = new Set<Promise<void>>();
  detached = 0;

  constructor(private readonly inner: ObjectStore) {}

  createIfAbsent(key: string, body: ObjectBody, options?: CreateOptions): Promise<CreateResult> {
    return this.inner.createIfAbsent(key, body, options);
  }

  get(key: string, range?: ByteRange): Promise<Uint8Array> {
    return this.inner.get(key, range);
  }

  getStream(key: string): Promise<AsyncIterable<Uint8Array>> {
    return this.inner.getStream(key);
  }

  head(key: string): Promise<ObjectInfo | null> {
    return this.inner.head(key);
  }

  list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return this.inner.list(prefix, options);
  }

  async delete(key: string): Promise<void> {
    if (!key.includes("/payloads/")) return await this.inner.delete(key);
    this.detached++;
    const sent = this.inner.delete(key).catch(() => undefined);
    this.#pending.add(sent);
    void sent.finally(() => this.#pending.delete(sent));
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#pending]);
    await this.inner.close?.();
  }
}
