/**
 * The object store port: immutable archive payloads and manifests, and the
 * query catalog's entries.
 *
 * Keys are `/`-separated relative paths (see domain/object-keys.ts).
 * Payloads and manifests are never overwritten: their only write is
 * create-if-absent, so a retry or a takeover that produces the same content
 * reaches the same key and finds its own earlier work instead of clobbering
 * it. The one overwrite, {@link ObjectStore.replace}, serves the catalog's
 * tombstones (see usecases/catalog.ts).
 *
 * Errors: a missing object is {@link ObjectNotFoundError}; a key that could
 * escape the store (absolute, `..`, NUL, empty segment) is InvalidInputError;
 * transport failures are TransientStoreError (retryable). Every operation is
 * safe to retry.
 */

import type { StorageClass } from "../domain/table-policy.js";

/** What every call of the store may take. */
export interface CallOptions {
  /**
   * Stop when this aborts (a lost lease, see usecases/under-lease.ts): the
   * call then throws `signal.reason`, never a TransientStoreError, and a
   * request in flight is cancelled; a create so stopped leaves nothing at its
   * key. A store whose calls are local and short (file, memory) may ignore it.
   */
  readonly signal?: AbortSignal;
}

export interface HeadOptions extends CallOptions {
  /** Also report the stored bytes' SHA-256 where the store knows it (see {@link ObjectStore.head}). */
  readonly checksum?: boolean;
}

export interface DeleteOptions extends CallOptions {
  /**
   * Leave an object that an unexpired Object Lock retention protects exactly
   * as it is (in a versioned bucket not even a delete marker) and throw
   * ObjectLockedError. GC asks for this: a retained object is kept and
   * counted, not hidden behind a marker while its bytes stay billed. A
   * catalog entry's removal does not (a marker is all it needs). Stores
   * without retention (file, memory) ignore it.
   */
  readonly unlessRetained?: boolean;
}

export interface ObjectStore {
  /**
   * Create `key` with `body` unless it exists. Never overwrites.
   *
   * Returns `created` when this call made the object and `already-exists` when
   * any object (same bytes or not) was there first; the caller verifies an
   * existing object before trusting it. The object is durable when `created`
   * is returned. Among concurrent creates of one key exactly one returns
   * `created`. On failure nothing is visible at `key` (partial uploads are
   * aborted; temporary files removed).
   */
  createIfAbsent(key: string, body: ObjectBody, options?: CreateOptions): Promise<CreateResult>;

  /**
   * Write `key` with `body` whether or not it exists, atomically: a reader
   * sees the old bytes or the new, never a mix or nothing. Only the query
   * catalog uses it, to empty an entry whose version was replaced (a
   * tombstone that a late create-if-absent of that version cannot undo).
   * Safe to retry.
   */
  replace(key: string, body: Uint8Array, options?: CreateOptions): Promise<void>;

  /** The whole object, or `[range.start, range.end)` of it. Throws ObjectNotFoundError. */
  get(key: string, range?: ByteRange, options?: CallOptions): Promise<Uint8Array>;

  /** Stream the object in chunks; memory stays bounded by the chunk size. */
  getStream(key: string, options?: CallOptions): Promise<AsyncIterable<Uint8Array>>;

  /**
   * Size and modification time, or null when absent. With `checksum`, also
   * the SHA-256 of the stored bytes where the store can tell it without a
   * second request (S3: the full-object checksum a single-request upload
   * sent, which S3 checked on the way in and keeps at rest; file and memory:
   * by hashing the bytes). Absent when the store cannot tell (S3: an object
   * stored in parts keeps a CRC-32, or one written without a SHA-256): the
   * caller then hashes the bytes itself.
   */
  head(key: string, options?: HeadOptions): Promise<ObjectInfo | null>;

  /** One page of keys under `prefix` in lexicographic order. */
  list(prefix: string, options?: ListOptions): Promise<ListPage>;

  /**
   * Delete `key`; deleting an absent key succeeds. A store that refuses
   * because an Object Lock retention or legal hold protects the object
   * throws ObjectLockedError and deleted nothing.
   */
  delete(key: string, options?: DeleteOptions): Promise<void>;

  /**
   * The absolute URI under which query engines read `key`: `s3://bucket/key`
   * for S3 (not percent-encoded, as Athena, Spark and DuckDB expect),
   * `file:///absolute/path` (percent-encoded where a file URL must be) for
   * the file store. Pure: it does not check that the object exists. Throws
   * InvalidInputError for a key the store would refuse.
   */
  uri(key: string): Promise<string>;

  /**
   * The whole-object checksum this store asks its backend to keep, and to
   * check on the wire, for a body of `byteLength` bytes created from a file
   * (an in-memory body is always stored in one request, as the smallest file
   * is); undefined, or no such method, when the store keeps none (file,
   * memory). Pure: no request, the same answer for the same length.
   * Manifests record it (see archive/manifest.ts), so an archive says what
   * its store verifies. A decorator must forward it (see ForwardingObjectStore).
   */
  storageChecksumFor?(byteLength: number): Promise<StorageChecksum | undefined>;

  /** Release connections and handles. */
  close?(): Promise<void>;
}

/**
 * Bytes in memory, or a local file to stream from (large payloads are
 * written to a temporary file first so their content address is known
 * before upload).
 */
export type ObjectBody = Uint8Array | { readonly filePath: string; readonly byteLength: number };

export interface CreateOptions extends CallOptions {
  readonly contentType?: string;
  /**
   * The body's SHA-256 (64 lowercase hex digits) when the caller already
   * knows it (payloads are named by it); a store that keeps a SHA-256 then
   * does not hash the body again. It must be the body's: a store that checks
   * it refuses the body otherwise.
   */
  readonly sha256?: string;
  /**
   * The S3 storage class to write the object in (payloads only: manifests
   * and catalog entries stay STANDARD); undefined: the bucket's default.
   * Stores without classes (file, memory) ignore it.
   */
  readonly storageClass?: StorageClass;
}

/**
 * A full-object checksum a store keeps beside the bytes and checks on every
 * write and whole read: `sha256` (a body stored in one request), `crc32`
 * (a body stored in parts, its CRC-32 over the whole object, not per part).
 */
export const STORAGE_CHECKSUMS = ["sha256", "crc32"] as const;
export type StorageChecksum = (typeof STORAGE_CHECKSUMS)[number];

export type CreateResult = "created" | "already-exists";

export interface ByteRange {
  /** Inclusive start offset. */
  readonly start: number;
  /** Exclusive end offset. */
  readonly end: number;
}

export interface ObjectInfo {
  readonly key: string;
  readonly size: number;
  readonly lastModified: Date;
  /**
   * Lowercase hex SHA-256 of the stored bytes, from a `head` that asked for
   * it and a store that knows it; never set by `list`.
   */
  readonly sha256?: string;
  /** The storage class the store reports (S3 HeadObject; STANDARD when S3 names none); never set by `list`. */
  readonly storageClass?: string;
  /**
   * The Object Lock on the object, as `head` reports it (S3: to a caller
   * allowed s3:GetObjectRetention and s3:GetObjectLegalHold); absent when
   * none, and always from stores without Object Lock (file, memory). Expiry
   * reads it (usecases/expiry.ts); a retention in the past no longer holds.
   */
  readonly objectLock?: { readonly legalHold: boolean; readonly retainUntil: Date | null };
}

export interface ListOptions extends CallOptions {
  readonly continuationToken?: string;
  /**
   * List only keys after this one (exclusive), as S3's StartAfter: where a
   * listing stopped in an earlier process, since a continuation token may
   * not outlive it. Ignored when `continuationToken` is given.
   */
  readonly startAfter?: string;
  /** At most this many keys per page (default 1000). */
  readonly maxKeys?: number;
}

export interface ListPage {
  readonly objects: readonly ObjectInfo[];
  /** Pass to the next call to continue; undefined on the last page. */
  readonly continuationToken: string | undefined;
}

/** Every object under `prefix`, page by page. */
export async function* listAll(
  store: ObjectStore,
  prefix: string,
  startAfter?: string,
): AsyncIterable<ObjectInfo> {
  let continuationToken: string | undefined;
  do {
    const page = await store.list(prefix, { continuationToken, startAfter });
    yield* page.objects;
    continuationToken = page.continuationToken;
  } while (continuationToken !== undefined);
}
