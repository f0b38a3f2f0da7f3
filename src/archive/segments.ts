/**
 * Sealing and verifying archives of either manifest version. A segmented
 * bucket's manifest (v5) is written only after every part it lists was
 * verified and recorded, and it is read back, validated against the
 * recorded parts, and each part re-checked by HEAD before its key is
 * returned, as {@link sealManifest} does for a single payload.
 */
import type { BucketStrategy } from "../domain/bucket.js";
import { manifestKey as contentManifestKey } from "../domain/object-keys.js";
import type { ArchiveFormat } from "../domain/table.js";
import type { BucketPart, PayloadFacts } from "../ports/hot-store.js";
import type { ObjectStore } from "../ports/object-store.js";
import { sha256Hex, type ManifestBucket } from "./manifest.js";
import {
  buildSegmentedManifest,
  manifestParts,
  serializeArchiveManifest,
  validateArchiveManifest,
  type ArchiveManifest,
  type ArchiveManifestExpectations,
  type PayloadPart,
} from "./manifest-v5.js";
import { checkPayloadSize, writeVerifiedManifest, type ArchiveBucketRef } from "./store.js";
import { verifyPayload, type ArchivedBucketExpectations } from "./verify.js";

export interface SealSegmentedInput {
  readonly store: ObjectStore;
  readonly prefix: string;
  readonly bucket: ArchiveBucketRef;
  readonly strategy: BucketStrategy;
  readonly start: Date;
  readonly end: Date;
  readonly generation: number;
  readonly format: ArchiveFormat;
  /** The recorded parts, in index order. */
  readonly parts: readonly BucketPart[];
}

/** Write, read back and validate manifest v5 for the recorded parts; returns its key. */
export async function sealSegmentedManifest(input: SealSegmentedInput): Promise<string> {
  const { store, prefix } = input;
  const bucket: ManifestBucket = {
    tableId: input.bucket.tableId,
    partitionKey: input.bucket.partitionKey,
    bucketKey: input.bucket.bucketKey,
    strategy: input.strategy,
    start: input.start,
    end: input.end,
  };
  const manifest = buildSegmentedManifest({
    bucket,
    generation: input.generation,
    format: input.format,
    parts: input.parts,
  });
  const bytes = serializeArchiveManifest(manifest);
  const key = contentManifestKey({ prefix, ...input.bucket }, sha256Hex(bytes));
  const expectations: ArchiveManifestExpectations = {
    prefix,
    bucket,
    parts: input.parts,
    format: input.format,
    generation: input.generation,
    manifestKey: key,
  };
  await writeVerifiedManifest(
    store,
    key,
    bytes,
    (b) => validateArchiveManifest(b, expectations, key),
    input.parts,
  );
  return key;
}

export interface VerifiedArchiveParts {
  readonly manifestKey: string;
  readonly manifest: ArchiveManifest;
  /** The payload objects in clustering order (one for manifest v4). */
  readonly parts: readonly PayloadPart[];
}

/**
 * {@link verifyArchivedBucket} for either manifest version: the manifest
 * against its key and expectations, then every part's size (HEAD) and,
 * unless `verifyPayloadBytes` is false, its SHA-256, length and decoded rows.
 */
export async function verifyArchive(
  store: ObjectStore,
  manifestKey: string,
  expected: ArchivedBucketExpectations & { readonly parts?: readonly PayloadFacts[] },
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
      payload: expected.payload,
      parts: expected.parts,
      format: expected.format,
      manifestKey,
    },
    manifestKey,
  );
  const parts = manifestParts(manifest);
  for (const part of parts) {
    await checkPayloadSize(store, part.key, part.byteLength, `in manifest ${manifestKey}`);
  }
  if (expected.verifyPayloadBytes !== false) {
    for (const part of parts) {
      await verifyPayload(store, part, manifest.format, {
        bucket: expected.bucket,
        tempDir: expected.tempDir,
      });
    }
  }
  return { manifestKey, manifest, parts };
}
