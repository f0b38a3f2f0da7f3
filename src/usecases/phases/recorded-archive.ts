/**
 * What a bucket's metadata vouches for after export: its verified parts, one
 * or many, read in one shape (how a one-part export is stored, and which
 * manifest version it seals with, stays in the hot store's row mapping and
 * the manifest writer). Seal, publish, cleanup, restore, the catalog and the
 * scrub all start from here.
 */
import { describeBucket } from "../../domain/bucket.js";
import type { ArchiveFormat } from "../../domain/table.js";
import { InvariantViolationError } from "../../errors.js";
import type { BucketMetadata, BucketPart, HotReads } from "../../ports/hot-store.js";
import { formatOfPayloadKey } from "../../domain/object-keys.js";

export interface RecordedArchive {
  readonly format: ArchiveFormat;
  /** At least one, in clustering order. */
  readonly parts: readonly BucketPart[];
  readonly rowCount: number;
  readonly byteLength: number;
}

/**
 * The recorded parts of an exported bucket; null while export has not
 * finished. Throws InvariantViolationError when the part records disagree
 * with the totals the export's finishing commit recorded.
 */
export async function recordedArchive(
  hotStore: HotReads,
  metadata: BucketMetadata,
): Promise<RecordedArchive | null> {
  const totals = metadata.exported;
  if (totals === null) return null;
  // A one-part bucket's part came with its metadata: no second read.
  const parts = totals.only !== undefined ? [totals.only] : await hotStore.listParts(metadata.id);
  const rows = parts.reduce((sum, p) => sum + p.rowCount, 0);
  const bytes = parts.reduce((sum, p) => sum + p.byteLength, 0);
  if (
    parts.length === 0 ||
    parts.length !== totals.parts ||
    rows !== totals.rowCount ||
    bytes !== totals.byteLength
  ) {
    throw new InvariantViolationError(
      `bucket ${describeBucket(metadata.id)} recorded ${totals.parts} parts of ${totals.rowCount} rows ` +
        `and ${totals.byteLength} bytes, but its part records list ${parts.length} parts of ${rows} rows and ${bytes} bytes`,
    );
  }
  return {
    format: formatOfPayloadKey(parts[0]!.key),
    parts,
    rowCount: rows,
    byteLength: bytes,
  };
}

/**
 * The recorded parts of a bucket past export. Their absence breaks the
 * archive's invariant; `problem` says which, in the caller's words.
 */
export async function requireRecordedArchive(
  hotStore: HotReads,
  metadata: BucketMetadata,
  problem: string,
): Promise<RecordedArchive> {
  const recorded = await recordedArchive(hotStore, metadata);
  if (recorded === null) throw new InvariantViolationError(problem);
  return recorded;
}

/** The recorded parts and manifest key of a sealed bucket; either missing is reported as `problem`. */
export async function requireSealedArchive(
  hotStore: HotReads,
  metadata: BucketMetadata,
  problem: string,
): Promise<{ readonly recorded: RecordedArchive; readonly manifestKey: string }> {
  const recorded = await recordedArchive(hotStore, metadata);
  const manifestKey = metadata.manifestKey;
  if (recorded === null || manifestKey === null) throw new InvariantViolationError(problem);
  return { recorded, manifestKey };
}

/**
 * What a bucket's metadata and recorded parts state about its archive, as
 * {@link verifyArchive}'s expectations: the bucket, its bounds, the format
 * and every part.
 */
export function archiveExpectationsOf(metadata: BucketMetadata, recorded: RecordedArchive) {
  return {
    bucket: metadata.id,
    strategy: metadata.strategy,
    start: metadata.start,
    end: metadata.end,
    format: recorded.format,
    parts: recorded.parts,
  };
}
