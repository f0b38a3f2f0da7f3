/**
 * What a bucket's metadata vouches for after export: one payload (manifest
 * v4) or the recorded parts of a segmented export (manifest v5). Seal,
 * publish, cleanup and restore all start from here.
 */
import { describeBucket } from "../../domain/bucket.js";
import type { ArchiveFormat } from "../../domain/table.js";
import { InvariantViolationError } from "../../errors.js";
import type { BucketMetadata, BucketPart, HotReads, PayloadFacts } from "../../ports/hot-store.js";
import { formatOfPayloadKey } from "../../domain/object-keys.js";

export type RecordedPayload =
  | {
      readonly kind: "single";
      readonly format: ArchiveFormat;
      readonly payload: PayloadFacts;
      readonly rowCount: number;
      readonly byteLength: number;
    }
  | {
      readonly kind: "segmented";
      readonly format: ArchiveFormat;
      readonly parts: readonly BucketPart[];
      readonly rowCount: number;
      readonly byteLength: number;
    };

/**
 * The recorded payload of an exported bucket; null while export has not
 * finished. Throws InvariantViolationError when the part records disagree
 * with the totals the export's finishing commit recorded.
 */
export async function recordedPayload(
  hotStore: HotReads,
  metadata: BucketMetadata,
): Promise<RecordedPayload | null> {
  if (metadata.payload !== null) {
    const payload = metadata.payload;
    return {
      kind: "single",
      format: formatOfPayloadKey(payload.key),
      payload,
      rowCount: payload.rowCount,
      byteLength: payload.byteLength,
    };
  }
  const totals = metadata.segmented;
  if (totals === null) return null;
  const parts = await hotStore.listParts(metadata.id);
  const rows = parts.reduce((sum, p) => sum + p.rowCount, 0);
  const bytes = parts.reduce((sum, p) => sum + p.byteLength, 0);
  if (parts.length !== totals.parts || rows !== totals.rowCount || bytes !== totals.byteLength) {
    throw new InvariantViolationError(
      `bucket ${describeBucket(metadata.id)} recorded ${totals.parts} parts of ${totals.rowCount} rows ` +
        `and ${totals.byteLength} bytes, but its part records list ${parts.length} parts of ${rows} rows and ${bytes} bytes`,
    );
  }
  return {
    kind: "segmented",
    format: formatOfPayloadKey(parts[0]!.key),
    parts,
    rowCount: rows,
    byteLength: bytes,
  };
}

/**
 * The recorded payload of a bucket past export. Its absence breaks the
 * archive's invariant; `problem` says which, in the caller's words.
 */
export async function requireRecordedPayload(
  hotStore: HotReads,
  metadata: BucketMetadata,
  problem: string,
): Promise<RecordedPayload> {
  const recorded = await recordedPayload(hotStore, metadata);
  if (recorded === null) throw new InvariantViolationError(problem);
  return recorded;
}

/** The recorded payload and manifest key of a sealed bucket; either missing is reported as `problem`. */
export async function requireSealedArchive(
  hotStore: HotReads,
  metadata: BucketMetadata,
  problem: string,
): Promise<{ readonly recorded: RecordedPayload; readonly manifestKey: string }> {
  const recorded = await recordedPayload(hotStore, metadata);
  const manifestKey = metadata.manifestKey;
  if (recorded === null || manifestKey === null) throw new InvariantViolationError(problem);
  return { recorded, manifestKey };
}

/**
 * What a bucket's metadata and recorded payload state about its archive, as
 * {@link verifyArchive}'s expectations: the bucket, its bounds, the format,
 * and the single payload or every part.
 */
export function archiveExpectationsOf(metadata: BucketMetadata, recorded: RecordedPayload) {
  return {
    bucket: metadata.id,
    strategy: metadata.strategy,
    start: metadata.start,
    end: metadata.end,
    format: recorded.format,
    ...(recorded.kind === "single" ? { payload: recorded.payload } : { parts: recorded.parts }),
  };
}
