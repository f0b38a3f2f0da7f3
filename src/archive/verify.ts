/**
 * Re-verifying what is already stored: a recorded payload (a takeover
 * resuming from metadata only it vouches for) and a whole archived bucket
 * (before publication, and for operators). Each streams the payload once,
 * hashing it, and decodes the same bytes from a temporary copy.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tempDiskFull } from "./temp-disk.js";
import os from "node:os";
import path from "node:path";
import { ArchiveIntegrityError, ObjectNotFoundError } from "../errors.js";
import { parseBucketKey, type BucketStrategy } from "../domain/bucket.js";
import type { ArchiveFormat } from "../domain/table.js";
import { dateToMicros } from "../domain/time.js";
import type { PayloadFacts } from "../ports/hot-store.js";
import type { ObjectStore } from "../ports/object-store.js";
import {
  manifestParts,
  validateArchiveManifest,
  type ArchiveManifest,
  type PayloadPart,
} from "./manifest-v5.js";
import { inspectPayload, type PayloadExpectations } from "./payload-reader.js";
import { fileByteSource } from "./byte-sources.js";
import {
  checkStoredFacts,
  downloadVerified,
  hashVerified,
  missingObject,
} from "./verified-object.js";
import { bucketExpectations, checkPayloadSize, type ArchiveBucketRef } from "./store.js";

export interface PayloadVerification {
  /** Bucket whose payload this is: its partition key and bounds are checked on every record. */
  readonly bucket?: ArchiveBucketRef;
  readonly tempDir?: string;
}

/**
 * Re-verify a recorded payload in full: size, SHA-256 and length of the
 * stored bytes, and the decoded row count (plus partition key, bounds and
 * order when the bucket is given). Used when a takeover resumes from a
 * payload that only our own metadata vouches for.
 */
export async function verifyPayload(
  store: ObjectStore,
  payload: PayloadFacts,
  format: ArchiveFormat,
  options: PayloadVerification = {},
): Promise<PayloadFacts> {
  await checkPayloadSize(store, payload.key, payload.byteLength, "were recorded");
  return await verifyPayloadBytes(
    store,
    payload,
    format,
    options.bucket === undefined ? {} : bucketExpectations(options.bucket),
    "were recorded",
    options.tempDir,
  );
}

/**
 * Stream the payload once into a temporary file while hashing it; once its
 * length and hash match, decode that file (the same bytes) and check rows.
 */
async function verifyPayloadBytes(
  store: ObjectStore,
  payload: PayloadFacts,
  format: ArchiveFormat,
  expected: PayloadExpectations,
  recordedBy: string,
  tempDir: string | undefined,
): Promise<PayloadFacts> {
  const key = payload.key;
  const tempRoot = tempDir ?? os.tmpdir();
  const dir = await mkdtemp(path.join(tempRoot, "pulpitum-verify-")).catch((error: unknown) => {
    throw tempDiskFull(error, tempRoot);
  });
  try {
    const filePath = path.join(dir, `payload.${format}`);
    const { sha256, byteLength } = await downloadVerified(
      store,
      payload,
      filePath,
      recordedBy,
    ).catch((error: unknown) => {
      throw tempDiskFull(error, tempRoot);
    });
    const source = await fileByteSource(filePath, key);
    let rowCount: number;
    try {
      ({ rowCount } = await inspectPayload(source, format, expected));
    } finally {
      await source.close();
    }
    if (rowCount !== payload.rowCount) {
      throw new ArchiveIntegrityError(
        key,
        `payload decodes to ${rowCount} rows, ${payload.rowCount} ${recordedBy}`,
      );
    }
    return { key, sha256, rowCount, byteLength };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface ArchivedBucketExpectations {
  /** Archive prefix; without it the manifest's keys are checked up to the prefix. */
  readonly prefix?: string;
  /** The bucket the manifest is supposed to describe. */
  readonly bucket: ArchiveBucketRef;
  readonly strategy?: BucketStrategy;
  readonly start?: Date;
  readonly end?: Date;
  readonly format?: ArchiveFormat;
  /** The parts recorded in metadata, when known: the manifest must name exactly them, in order. */
  readonly parts?: readonly PayloadFacts[];
  /**
   * Also stream, hash and decode the payload (default true). When false only
   * the manifest is validated and the payload's size checked with HEAD,
   * which suffices when this worker verified the payload itself earlier.
   */
  readonly verifyPayloadBytes?: boolean;
  /**
   * With `verifyPayloadBytes: false`: also require each part's stored bytes
   * to hash to the manifest's SHA-256, from the checksum the store returns
   * with the HEAD (no extra request), or by streaming the part through a
   * hash where the store cannot tell (see {@link checkStoredPart}).
   */
  readonly storedSha256?: boolean;
  readonly tempDir?: string;
}

export interface VerifiedArchiveParts {
  readonly manifestKey: string;
  readonly manifest: ArchiveManifest;
  /** The payload objects in clustering order (one for manifest v4). */
  readonly parts: readonly PayloadPart[];
}

/**
 * Re-verify an archived (or sealed) bucket of either manifest version: the
 * manifest's bytes against its content-addressed key and the expected
 * bucket and its recorded parts, then every part's size (HEAD) and, unless
 * `verifyPayloadBytes` is false, its SHA-256, length and decoded rows
 * against the manifest. A v4 manifest is the one-part case. Used before
 * publication and cleanup, before a restore, after a takeover resumes from
 * recorded artifacts, and by `pulpitum verify`.
 *
 * Throws ArchiveIntegrityError on any mismatch, including a missing payload;
 * a missing manifest is ObjectNotFoundError, as the key may simply be wrong.
 */
export async function verifyArchive(
  store: ObjectStore,
  manifestKey: string,
  expected: ArchivedBucketExpectations,
): Promise<VerifiedArchiveParts> {
  const bytes = await store.get(manifestKey);
  const manifest = validateArchiveManifest(
    bytes,
    {
      prefix: expected.prefix,
      bucket: {
        ...expected.bucket,
        strategy: expected.strategy,
        start: expected.start,
        end: expected.end,
      },
      parts: expected.parts,
      format: expected.format,
      manifestKey,
    },
    manifestKey,
  );
  const parts = manifestParts(manifest);
  const recordedBy = `in manifest ${manifestKey}`;
  if (expected.verifyPayloadBytes === false) {
    for (const part of parts) {
      if (expected.storedSha256 === true) await checkStoredPart(store, part, recordedBy);
      else await checkPayloadSize(store, part.key, part.byteLength, recordedBy);
    }
    return { manifestKey, manifest, parts };
  }
  for (const part of parts) await checkPayloadSize(store, part.key, part.byteLength, recordedBy);

  const descriptor = parseBucketKey(manifest.bucket_key, manifest.bucket_strategy);
  const rows: PayloadExpectations = {
    partitionKey: Buffer.from(manifest.partition_key_b64, "base64"),
    start: dateToMicros(descriptor.start),
    end: dateToMicros(descriptor.end),
  };
  for (const part of parts) {
    await verifyPayloadBytes(store, part, manifest.format, rows, recordedBy, expected.tempDir);
  }
  return { manifestKey, manifest, parts };
}

/**
 * The stored bytes of `part` are the ones `recordedBy` states: its length
 * and the SHA-256 the store keeps beside them (S3's full-object checksum of
 * a single-request upload, which S3 verified on arrival), read with the
 * HEAD that checks the length. Where the store cannot tell (an S3 object
 * uploaded in parts keeps a CRC-32; an object rewritten by another tool may
 * keep none), the part is streamed through a hash instead: one GET, no copy.
 * Either way a byte changed at rest, however the size stayed, is found.
 */
export async function checkStoredPart(
  store: ObjectStore,
  part: PayloadPart,
  recordedBy: string,
): Promise<void> {
  const expected = { key: part.key, sha256: part.sha256, byteLength: part.byteLength };
  const info = await store.head(part.key, { checksum: true });
  if (info === null) throw missingObject(expected, recordedBy);
  if (info.sha256 === undefined) {
    await hashVerified(store, expected, recordedBy);
    return;
  }
  checkStoredFacts(expected, { sha256: info.sha256, byteLength: info.size }, recordedBy, "stored");
}

/**
 * Check that a published bucket's manifest exists and lists exactly the
 * recorded parts, and that each part's stored bytes are the published ones:
 * its length and SHA-256 ({@link checkStoredPart}). Cleanup runs it before
 * deleting any hot row: whatever went wrong in the archive (an object lost,
 * or rewritten with other bytes of the same size), the hot rows are never
 * the last copy to go.
 */
export async function checkPublishedArchive(
  store: ObjectStore,
  manifestKey: string,
  expected: ArchivedBucketExpectations,
): Promise<void> {
  try {
    await verifyArchive(store, manifestKey, {
      ...expected,
      verifyPayloadBytes: false,
      storedSha256: true,
    });
  } catch (error) {
    if (error instanceof ObjectNotFoundError && error.objectKey === manifestKey) {
      throw new ArchiveIntegrityError(manifestKey, "the published manifest is missing", {
        cause: error,
      });
    }
    throw error;
  }
}
