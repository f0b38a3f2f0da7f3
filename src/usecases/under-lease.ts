/**
 * A use case's ports bound to its lease's AbortSignal, so that work under a
 * lease learns of a lost lease one way: a thrown LeaseLostError.
 *
 * Every call through these views first throws the signal's reason once it
 * aborted (the heartbeat aborts it with a LeaseLostError on its first failed
 * renewal), so a phase stops at its next call after the loss without polling
 * anything. The object-store view also hands the signal to each call, so an
 * upload or read in flight is cancelled at once, and whatever that call
 * fails with after the abort is the loss, never an outage. A fenced hot-store
 * call that the store refused (`{ kind: "lease-lost" }`) throws a
 * LeaseLostError saying what was lost; the views' types drop that result, so
 * no phase can branch on it. The SQL fence stays the durable guarantee: a
 * call the signal did not stop is still refused by its statement's lease
 * condition.
 */
import { LeaseLostError } from "../errors.js";
import type { BucketMetadata, BucketPart, ClaimCutoff } from "../ports/hot-store.js";
import type {
  CallOptions,
  ObjectBody,
  ObjectStore,
  ByteRange,
  CreateOptions,
  CreateResult,
  DeleteOptions,
  HeadOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
  StorageChecksum,
} from "../ports/object-store.js";
import type { ArchiverContext } from "./context.js";

type Refused = { readonly kind: "lease-lost" };

/** `Store` as a use case under a lease sees it: no call returns a refusal, it throws one. */
export type UnderLease<Store> = {
  readonly [K in keyof Store]: Store[K] extends (...args: infer A) => Promise<infer R>
    ? (...args: A) => Promise<R extends Refused ? never : R>
    : Store[K];
};

/** `ctx` with its hot store and object store bound to `signal` (see the top of this module). */
export function underLease<Store extends object>(
  ctx: ArchiverContext<Store>,
  signal: AbortSignal,
): ArchiverContext<UnderLease<Store>> {
  return {
    ...ctx,
    hotStore: hotStoreUnderLease(ctx.hotStore, signal),
    objectStore: new ObjectStoreUnderLease(ctx.objectStore, signal),
  };
}

/**
 * What a refused fenced call reports, by the call: the reason the phase's
 * outcome (and the restore's report) gives; other calls name themselves.
 */
const REFUSALS: Readonly<
  Record<string, (args: readonly unknown[], found: BucketMetadata | null) => string>
> = {
  claim: (args, found) => describeLostClaim(found?.state, args[2] as ClaimCutoff),
  snapshotPage: () => new LeaseLostError("snapshot").message,
  recordPart: (args) => `lease lost before part ${(args[2] as BucketPart).index} was recorded`,
  finishExport: () => "lease lost before the export was finished",
  recordManifest: () => "lease lost before the manifest was recorded",
  publish: () => "lease lost before publication committed",
  cleanupBatch: () => "lease lost during cleanup",
  finishCleanup: () => "lease lost before cleanup was marked complete",
  beginRestore: () => "lease lost before the restore mark committed",
  restoreRecords: () => "lease lost while inserting restored rows",
  finishRestore: () => "lease lost before the route flipped to hot",
  beginExpiry: () =>
    "the expiry mark did not commit: the lease was lost, or the table was paused, its policy changed, or a restore began since the bucket was found due",
  holdExpiry: () => "lease lost before the expiry hold was recorded",
  finishExpiry: () => "lease lost before the expiry finished",
  replaceManifest: () => "lease lost before the repaired manifest was recorded",
};

function describeLostClaim(state: string | undefined, eligibility: ClaimCutoff): string {
  if (state !== undefined && state !== "hot") return `the bucket is already ${state}`;
  const version =
    eligibility.policyVersion === undefined
      ? ""
      : ` of its table's policy version ${eligibility.policyVersion} (a changed window refuses it)`;
  return `the lease expired or the bucket is not eligible for the cutoff ${eligibility.cutoff.toISOString()}${version}`;
}

function isRefusal(result: unknown): result is Refused & { metadata?: BucketMetadata | null } {
  return (
    typeof result === "object" &&
    result !== null &&
    (result as { kind?: unknown }).kind === "lease-lost"
  );
}

function hotStoreUnderLease<Store extends object>(
  store: Store,
  signal: AbortSignal,
): UnderLease<Store> {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      const method = value as (...args: unknown[]) => Promise<unknown>;
      const operation = String(property);
      return async (...args: unknown[]) => {
        signal.throwIfAborted();
        const result = await method.apply(target, args);
        if (!isRefusal(result)) return result;
        const reason = REFUSALS[operation]?.(args, result.metadata ?? null);
        throw new LeaseLostError(operation, { reason });
      };
    },
  }) as unknown as UnderLease<Store>;
}

class ObjectStoreUnderLease implements ObjectStore {
  constructor(
    private readonly inner: ObjectStore,
    private readonly signal: AbortSignal,
  ) {}

  async createIfAbsent(
    key: string,
    body: ObjectBody,
    options?: CreateOptions,
  ): Promise<CreateResult> {
    return await this.#call(options, (o) => this.inner.createIfAbsent(key, body, o));
  }

  async replace(key: string, body: Uint8Array, options?: CreateOptions): Promise<void> {
    await this.#call(options, (o) => this.inner.replace(key, body, o));
  }

  async get(key: string, range?: ByteRange, options?: CallOptions): Promise<Uint8Array> {
    return await this.#call(options, (o) => this.inner.get(key, range, o));
  }

  async getStream(key: string, options?: CallOptions): Promise<AsyncIterable<Uint8Array>> {
    const chunks = await this.#call(options, (o) => this.inner.getStream(key, o));
    const signal = this.signal;
    return (async function* () {
      try {
        yield* chunks;
      } catch (error) {
        signal.throwIfAborted();
        throw error;
      }
    })();
  }

  async head(key: string, options?: HeadOptions): Promise<ObjectInfo | null> {
    return await this.#call(options, (o) => this.inner.head(key, o));
  }

  async list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return await this.#call(options, (o) => this.inner.list(prefix, o));
  }

  async delete(key: string, options?: DeleteOptions): Promise<void> {
    await this.#call(options, (o) => this.inner.delete(key, o));
  }

  async uri(key: string): Promise<string> {
    return await this.inner.uri(key);
  }

  async storageChecksumFor(byteLength: number): Promise<StorageChecksum | undefined> {
    return await this.inner.storageChecksumFor?.(byteLength);
  }

  /** `call` with the lease's signal (beside the caller's own, if any); after an abort, its reason. */
  async #call<O extends CallOptions, T>(
    options: O | undefined,
    call: (options: O) => Promise<T>,
  ): Promise<T> {
    this.signal.throwIfAborted();
    const own = options?.signal;
    const signal = own === undefined ? this.signal : AbortSignal.any([own, this.signal]);
    try {
      return await call({ ...options, signal } as O);
    } catch (error) {
      this.signal.throwIfAborted();
      throw error;
    }
  }
}
