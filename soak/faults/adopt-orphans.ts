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
import { ForwardingObjectStore } from "../../src/adapters/object-store/forwarding.js";
import type {
  ByteRange,
  CreateOptions,
  CreateResult,
  ObjectBody,
  ObjectInfo,
  ObjectStore,
} from "../../src/ports/object-store.js";

const ATTEMPT_NAMED = /\/payloads\/([0-9a-f]{64})-g\d+-[0-9a-f]{12}\.(parquet|json)$/;

export function contentOnlyKey(key: string): string {
  return key.replace(ATTEMPT_NAMED, "/payloads/$1.$2");
}

/** The object store with every payload key reduced to its content-only name. */
export class ContentOnlyPayloadStore extends ForwardingObjectStore {
  /** Creates that found the content-only object already there: adoptions. */
  adoptions = 0;

  constructor(
    inner: ObjectStore,
    private readonly onAdopt: (key: string) => void = () => {},
  ) {
    super(inner);
  }

  override async createIfAbsent(
    key: string,
    body: ObjectBody,
    options?: CreateOptions,
  ): Promise<CreateResult> {
    const mapped = contentOnlyKey(key);
    const result = await super.createIfAbsent(mapped, body, options);
    if (result === "already-exists" && mapped !== key) {
      this.adoptions++;
      this.onAdopt(mapped);
    }
    return result;
  }

  override get(key: string, range?: ByteRange): Promise<Uint8Array> {
    return super.get(contentOnlyKey(key), range);
  }

  override getStream(key: string): Promise<AsyncIterable<Uint8Array>> {
    return super.getStream(contentOnlyKey(key));
  }

  override async head(key: string): Promise<ObjectInfo | null> {
    const info = await super.head(contentOnlyKey(key));
    return info === null ? null : { ...info, key };
  }

  override delete(key: string): Promise<void> {
    return super.delete(contentOnlyKey(key));
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
      if (property === "finishExport") {
        // A one-part export's finish records its part.
        const finishExport = target.finishExport.bind(target);
        return ((lease, now, parts, only) =>
          finishExport(
            lease,
            now,
            parts,
            only === undefined ? undefined : { ...only, key: contentOnlyKey(only.key) },
          )) satisfies HotStore["finishExport"];
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
export class DetachedPayloadDeletes extends ForwardingObjectStore {
  readonly #pending = new Set<Promise<void>>();
  detached = 0;

  override async delete(key: string): Promise<void> {
    if (!key.includes("/payloads/")) return await super.delete(key);
    this.detached++;
    const sent = super.delete(key).catch(() => undefined);
    this.#pending.add(sent);
    void sent.finally(() => this.#pending.delete(sent));
  }

  override async close(): Promise<void> {
    await Promise.allSettled([...this.#pending]);
    await super.close();
  }
}
