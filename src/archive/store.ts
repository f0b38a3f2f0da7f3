/**
 * The store step: put a bucket's payload and manifest into the object store
 * so that nothing unverified is ever returned to the caller.
 *
 * Invariant: a PayloadFacts or manifest key returned from here names an
 * object whose stored bytes were read back and checked (SHA-256, length,
 * decoded rows). Ordering argument:
 *
 * 1. Encode to a temporary file while hashing, then create the object at the
 *    key derived from the hash and the export attempt. The content address
 *    must be known before the upload, and a conditional create (never an
 *    overwrite) makes a retried request of the same attempt land on the same
 *    key; so an already-existing object is not an error but something to
 *    verify. A different attempt (a takeover, a retry after a deferral) writes
 *    under its own name and never adopts an earlier attempt's object, which
 *    garbage collection may be deleting.
 * 2. Read the stored object back and verify it before returning. Verifying
 *    the local file instead would prove only that we can encode, not that the
 *    store holds what we sent. The rows are decoded from the local file
 *    (on the check thread, a Parquet row group at a time while the file is
 *    still being written, see payload-check.ts), but the decoded count and
 *    row digest are accepted only after the stored bytes hashed the same as
 *    the file, which makes them the rows of the stored object.
 * 3. The manifest is written only after its payload was verified, and is
 *    itself validated before it is sent and read back (or, for the seal
 *    phase, checked by the store on arrival and re-read by publish before
 *    the cutover), so a manifest key never points at a missing or different
 *    payload.
 *
 * Generations: the manifest records the lease generation that sealed it, so
 * a seal retried after a takeover (generation + 1) produces different bytes
 * and a second, equally valid manifest key next to the first. That is
 * intended: both describe the same verified payload, and the key recorded in
 * the bucket's metadata by the winning lease is the one readers follow.
 * The other stays unreferenced until garbage collection.
 */
import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tempDiskFull } from "./temp-disk.js";
import os from "node:os";
import path from "node:path";
import { ArchiveIntegrityError, ObjectNotFoundError } from "../errors.js";
import { parseBucketKey, type BucketStrategy } from "../domain/bucket.js";
import { payloadKey, type BucketLocation, type PayloadAttempt } from "../domain/object-keys.js";
import type { ArchiveFormat, TableId } from "../domain/table.js";
import type { StorageClass } from "../domain/table-policy.js";
import { dateToMicros } from "../domain/time.js";
import type { PayloadFacts } from "../ports/hot-store.js";
import type { RowBatch } from "../ports/row-page.js";
import type { CreateResult, ObjectStore } from "../ports/object-store.js";
import {
  buildManifest,
  MANIFEST_CONTENT_TYPE,
  serializeManifest,
  sha256Hex,
  validateManifest,
  type ManifestBucket,
  type ManifestExpectations,
} from "./manifest.js";
import type { PayloadContent, PayloadExpectations } from "./payload-reader.js";
import { startPayloadCheck, type CheckPlace } from "./payload-check.js";
import {
  writePayloadFile,
  type PayloadEncodingOptions,
  type WrittenPayload,
} from "./payload-writer.js";
import { manifestKey as contentManifestKey } from "../domain/object-keys.js";

export const PAYLOAD_CONTENT_TYPES: Record<ArchiveFormat, string> = {
  parquet: "application/vnd.apache.parquet",
  json: "application/x-ndjson",
};

/** The physical identity of the bucket being archived. */
export interface ArchiveBucketRef {
  readonly tableId: TableId;
  readonly partitionKey: Uint8Array;
  readonly bucketKey: string;
}

export interface StorePayloadInput {
  readonly store: ObjectStore;
  /** Archive prefix inside the store (may be empty). */
  readonly prefix: string;
  readonly bucket: ArchiveBucketRef;
  readonly format: ArchiveFormat;
  /**
   * The export attempt (its lease), named in the payload key so that no other
   * attempt can ever adopt this object (see domain/object-keys.ts).
   */
  readonly attempt: PayloadAttempt;
  /** Pages of the fenced snapshot in `(event_time, sort_key)` order. */
  readonly rows: AsyncIterable<RowBatch>;
  /** Where the temporary payload file goes (default: the OS temp folder). */
  readonly tempDir?: string;
  readonly encoding?: PayloadEncodingOptions;
  /** Where the written file is checked (default: on the check thread when it can start). */
  readonly checkOn?: CheckPlace;
  /** The table's payload storage class (S3; other stores ignore it); undefined: the store's default. */
  readonly storageClass?: StorageClass;
}

export interface StoredPayload extends PayloadFacts {
  /** `already-exists` when an earlier attempt had stored the same bytes (verified all the same). */
  readonly outcome: CreateResult;
}

/**
 * Encode, upload with create-if-absent, read back and verify one bucket's
 * payload. Throws ArchiveIntegrityError (and returns nothing) when the
 * stored object does not match what was written. The temporary file is
 * always removed.
 */
export async function storePayload(input: StorePayloadInput): Promise<StoredPayload> {
  const tempRoot = input.tempDir ?? os.tmpdir();
  try {
    return await storePayloadVia(input, tempRoot);
  } catch (error) {
    throw tempDiskFull(error, tempRoot);
  }
}

async function storePayloadVia(input: StorePayloadInput, tempRoot: string): Promise<StoredPayload> {
  const { store, bucket, format } = input;
  const dir = await mkdtemp(path.join(tempRoot, "pulpitum-payload-"));
  const filePath = path.join(dir, `payload.${format}`);
  // The file is checked while it is written, on the check thread (see payload-check.ts).
  const check = startPayloadCheck(
    { filePath, format, expected: bucketExpectations(bucket) },
    input.checkOn,
  );
  let finished = false;
  try {
    const written = await writePayloadFile(
      format,
      bucket.partitionKey,
      input.rows,
      filePath,
      input.encoding,
      {
        onRowGroupWritten: (group) => check.announce(group),
        onBytesWritten: (byteLength) => check.written(byteLength),
      },
    );
    // The check's last groups run while the upload and its read-back wait on
    // I/O; its result counts only once the stored bytes hash the same.
    const checked = check.finish(written.byteLength);
    finished = true;
    // Handled at once, so a refusal that comes while the upload is in flight is not an
    // unhandled rejection (which ends the process); it is raised below, after the upload.
    checked.content.catch(() => undefined);
    let key: string;
    let sha256: string;
    let outcome: CreateResult;
    try {
      sha256 = await checked.sha256;
      key = payloadKey(location(input.prefix, bucket), sha256, format, input.attempt);
      outcome = await store.createIfAbsent(
        key,
        { filePath: written.filePath, byteLength: written.byteLength },
        { contentType: PAYLOAD_CONTENT_TYPES[format], sha256, storageClass: input.storageClass },
      );
      await verifyStoredBytes(store, key, sha256, written.byteLength);
    } finally {
      // Never leave the check reading a file the caller is about to remove.
      await checked.content.catch(() => undefined);
    }
    checkDecodedRows(await checked.content.catch(renamedTo(key)), key, written);
    return {
      key,
      sha256,
      rowCount: written.rowCount,
      byteLength: written.byteLength,
      outcome,
    };
  } finally {
    if (!finished) check.cancel();
    await rm(dir, { recursive: true, force: true });
  }
}

/** A check names the file it read; the failure is the stored object's, under its key. */
function renamedTo(key: string): (error: unknown) => never {
  return (error) => {
    if (error instanceof ArchiveIntegrityError) throw new ArchiveIntegrityError(key, error.problem);
    throw error;
  };
}

function location(prefix: string, bucket: ArchiveBucketRef): BucketLocation {
  return {
    prefix,
    tableId: bucket.tableId,
    partitionKey: bucket.partitionKey,
    bucketKey: bucket.bucketKey,
  };
}

export function bucketExpectations(bucket: ArchiveBucketRef): PayloadExpectations {
  const descriptor = parseBucketKey(bucket.bucketKey);
  return {
    partitionKey: bucket.partitionKey,
    start: dateToMicros(descriptor.start),
    end: dateToMicros(descriptor.end),
  };
}

/**
 * Check the stored object against the file we wrote: the SHA-256 and length
 * of the bytes streamed back (one GET; a HEAD first would only tell the
 * length the GET counts anyway). Equal hashes make the stored object and the
 * local file the same bytes, so decoding the local file is decoding the
 * stored object (see {@link checkDecodedRows}).
 */
async function verifyStoredBytes(
  store: ObjectStore,
  key: string,
  sha256: string,
  byteLength: number,
): Promise<void> {
  const readBack = await hashObject(store, key).catch((error: unknown) => {
    if (error instanceof ObjectNotFoundError)
      throw new ArchiveIntegrityError(key, "the payload is missing right after it was stored", {
        cause: error,
      });
    throw error;
  });
  if (readBack.byteLength !== byteLength) {
    throw new ArchiveIntegrityError(
      key,
      `reading back returned ${readBack.byteLength} bytes, ${byteLength} were written`,
    );
  }
  if (readBack.sha256 !== sha256) {
    throw new ArchiveIntegrityError(
      key,
      `stored bytes hash to ${readBack.sha256}, ${sha256} were written`,
    );
  }
}

/** The decoded rows must reproduce the writer's count and row digest. */
function checkDecodedRows(content: PayloadContent, key: string, written: WrittenPayload): void {
  if (content.rowCount !== written.rowCount) {
    throw new ArchiveIntegrityError(
      key,
      `payload decodes to ${content.rowCount} rows, ${written.rowCount} were written`,
    );
  }
  if (content.rowsDigest !== written.rowsDigest) {
    throw new ArchiveIntegrityError(key, "decoded rows differ from the rows that were written");
  }
}

async function hashObject(
  store: ObjectStore,
  key: string,
): Promise<{ sha256: string; byteLength: number }> {
  const hash = createHash("sha256");
  let byteLength = 0;
  for await (const chunk of await store.getStream(key)) {
    hash.update(chunk);
    byteLength += chunk.byteLength;
  }
  return { sha256: hash.digest("hex"), byteLength };
}

/** What sealing a bucket's manifest names, whichever version it writes. */
export interface SealTarget {
  readonly store: ObjectStore;
  readonly prefix: string;
  readonly bucket: ArchiveBucketRef;
  readonly strategy: BucketStrategy;
  readonly start: Date;
  readonly end: Date;
  /** The lease generation sealing the bucket (see the note at the top of this module). */
  readonly generation: number;
  readonly format: ArchiveFormat;
}

/** The bucket identity and bounds a manifest of `target` records. */
export function manifestBucketOf(target: SealTarget): ManifestBucket {
  return {
    tableId: target.bucket.tableId,
    partitionKey: target.bucket.partitionKey,
    bucketKey: target.bucket.bucketKey,
    strategy: target.strategy,
    start: target.start,
    end: target.end,
  };
}

export interface SealManifestInput extends SealTarget {
  /** The verified payload, as {@link storePayload} returned it and metadata recorded it. */
  readonly payload: PayloadFacts;
}

/** A manifest as seal writes it: its bytes, its content-addressed key, and how it is validated. */
export interface RenderedManifest {
  readonly key: string;
  readonly bytes: Uint8Array;
  readonly validate: (bytes: Uint8Array) => unknown;
}

/** The bytes, key and validation of the bucket's manifest v4 (nothing is written). */
export async function renderManifest(input: SealManifestInput): Promise<RenderedManifest> {
  const { store, prefix, payload } = input;
  const bucket = manifestBucketOf(input);
  const manifest = buildManifest({
    bucket,
    generation: input.generation,
    format: input.format,
    payload,
    storageChecksum: await store.storageChecksumFor?.(payload.byteLength),
  });
  const bytes = serializeManifest(manifest);
  const key = contentManifestKey(location(prefix, bucket), sha256Hex(bytes));
  const expectations: ManifestExpectations = {
    prefix,
    bucket,
    payload,
    format: input.format,
    generation: input.generation,
    manifestKey: key,
  };
  return { key, bytes, validate: (b) => validateManifest(b, expectations, key) };
}

/**
 * Write the bucket's manifest v4 at its content-addressed key (create if
 * absent), read it back and validate it against the bucket and payload, and
 * check that the payload object exists with the recorded size. Returns the
 * manifest key.
 */
export async function sealManifest(input: SealManifestInput): Promise<string> {
  const { key, bytes, validate } = await renderManifest(input);
  await writeVerifiedManifest(input.store, key, bytes, validate, [input.payload]);
  return key;
}

/**
 * What {@link writeVerifiedManifest} checks beyond validating the bytes it
 * writes. The defaults check everything; the seal phase, whose parts export
 * verified under the bucket's fence and whose manifest publish re-reads
 * before the cutover, asks for less (docs/archival.md, "What each request
 * checks").
 */
export interface ManifestWriteChecks {
  /**
   * Read the manifest back even when this call created it (default true).
   * When false, a created manifest is trusted to hold the bytes sent: the
   * store checked them against their SHA-256 on the way in (S3 refuses a
   * body that arrives different, see ObjectStore.createIfAbsent); a manifest
   * that already existed is always read back and compared.
   */
  readonly readBackCreated?: boolean;
  /** HEAD every payload the manifest names, requiring its recorded size (default true). */
  readonly checkPayloads?: boolean;
}

/**
 * The manifest step both versions share: refuse to write a manifest that
 * would not validate (a payload key outside the bucket, say), create it if
 * absent at its content-addressed key, read it back and require the same
 * bytes and a valid manifest, then check that every payload object it names
 * exists with its recorded size (see {@link ManifestWriteChecks}).
 */
export async function writeVerifiedManifest(
  store: ObjectStore,
  key: string,
  bytes: Uint8Array,
  validate: (bytes: Uint8Array) => unknown,
  payloads: ReadonlyArray<{ readonly key: string; readonly byteLength: number }>,
  checks: ManifestWriteChecks = {},
): Promise<void> {
  validate(bytes);
  const created = await store.createIfAbsent(key, bytes, { contentType: MANIFEST_CONTENT_TYPE });
  if (created === "already-exists" || checks.readBackCreated !== false) {
    const stored = await store.get(key);
    if (!Buffer.from(stored).equals(Buffer.from(bytes))) {
      // Same key, different bytes: the hash in the key no longer matches, whatever is there.
      throw new ArchiveIntegrityError(
        key,
        "the stored manifest differs from the manifest that was written",
      );
    }
    validate(stored);
  }
  if (checks.checkPayloads === false) return;
  for (const payload of payloads) {
    await checkPayloadSize(store, payload.key, payload.byteLength, `in manifest ${key}`);
  }
}

export async function checkPayloadSize(
  store: ObjectStore,
  key: string,
  byteLength: number,
  recordedBy: string,
) {
  const info = await store.head(key);
  if (info === null)
    throw new ArchiveIntegrityError(key, `payload is missing (${byteLength} bytes ${recordedBy})`);
  if (info.size !== byteLength) {
    throw new ArchiveIntegrityError(
      key,
      `payload is ${info.size} bytes, ${byteLength} ${recordedBy}`,
    );
  }
}
