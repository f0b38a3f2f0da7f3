/**
 * Erasure of an archived bucket: a new version of its archive without the
 * partition's records in range (docs/erasure.md).
 *
 * Invariant: a reader sees the old version or the new one, never a mix;
 * the new version holds exactly the old one's records outside the range;
 * nothing is published from bytes that were not verified.
 *
 * Ordering argument:
 *
 * 1. Take the bucket's lease (a new generation), as restore and repair do:
 *    no worker, restore, repair, scrub mark or second erasure acts on the
 *    bucket meanwhile, and garbage collection keeps a leased bucket's
 *    objects, the ones written below included.
 * 2. Verify the published archive in full (manifest, every part's SHA-256,
 *    length and decoded rows), as restore does, before writing anything.
 * 3. Write one new part per old part, each the old part's records outside
 *    the range (read from a verified copy), at content-addressed keys that
 *    name this lease, then seal a manifest of them under this generation.
 *    A crash here leaves unreferenced objects for garbage collection and
 *    the bucket as it was.
 * 4. Publish in one transaction under the live lease that requires the
 *    bucket to still publish the manifest read in 2: parts, payload totals
 *    and manifest replaced, `dereferenced_at` stamped (GC's grace for a
 *    reader that followed the old route a moment before), the lease
 *    released and the receipt line written. This commit is the cutover.
 * 5. The caller (usecases/erase.ts) rewrites the bucket's query catalog
 *    entry after the commit (it names only published payloads), and keeps
 *    the job unfinished until it did.
 *
 * A bucket left with no records is published empty (one empty part): it
 * stays archived, so appends to it stay refused and no erased record can
 * come back through it, and its history (generation, receipt) stays.
 */
import { describeBucket, type BucketId } from "../domain/bucket.js";
import { LeaseLostError, UnknownTableError } from "../errors.js";
import { readRecordBatches } from "../archive/payload-reader.js";
import { verifiedObjectSource } from "../archive/verified-object.js";
import { sealArchiveManifest, verifyArchive } from "../archive/segments.js";
import { storePayload } from "../archive/store.js";
import type { ErasureRange, ErasureStore } from "../ports/erasure-store.js";
import type {
  BucketLeases,
  BucketMetadata,
  BucketPart,
  BucketRow,
  ClusteringPosition,
  HotReads,
} from "../ports/hot-store.js";
import type { ArchiveFormat } from "../domain/table.js";
import type { ArchiverContext } from "./context.js";
import { takeBucketLease } from "./bucket-lease.js";
import { underLease } from "./under-lease.js";
import { commitFenced } from "./phases/step.js";
import { archiveExpectationsOf, requireSealedArchive } from "./phases/recorded-archive.js";

export type EraseContext = ArchiverContext<HotReads & BucketLeases>;

export type ArchiveErasure =
  | { readonly kind: "erased"; readonly removed: number }
  | { readonly kind: "untouched" }
  | { readonly kind: "pending"; readonly reason: string };

/** Why an archived bucket cannot be rewritten now, or null when it can. */
export function archivedInFlight(metadata: BucketMetadata): string | null {
  if (metadata.restoreStartedAt !== null)
    return "being restored: taken once the restore finishes (then it is hot)";
  if (!metadata.hotDeleted)
    return "cleanup pending: its hot rows still exist; taken once cleanup finishes";
  if (metadata.corruption !== null)
    return `marked corrupt (${metadata.corruption.problem}): run \`pulpitum repair\` or \`pulpitum verify\` first`;
  if (metadata.expiryStartedAt !== null)
    return "being expired: done once its expiry finishes (its records are then gone)";
  if (metadata.manifestKey === null) return "archived without a manifest";
  return null;
}

export function inRange(eventTimeMicros: bigint, range: ErasureRange): boolean {
  const ms = (d: Date) => BigInt(d.getTime()) * 1000n;
  if (range.from !== null && eventTimeMicros < ms(range.from)) return false;
  if (range.to !== null && eventTimeMicros >= ms(range.to)) return false;
  return true;
}

/** Records of `metadata`'s verified archive in range (the dry run's count), without a lease. */
export async function countArchivedInRange(
  ctx: EraseContext,
  metadata: BucketMetadata,
  range: ErasureRange,
): Promise<number> {
  let count = 0;
  await scanArchive(ctx, metadata, (rows) => {
    for (const r of rows) if (inRange(r.eventTime, range)) count++;
  });
  return count;
}

/**
 * Verify `metadata`'s published archive in full (point 2), then hand each
 * part's rows, read from a copy checked again, to `onPart`: one part in
 * memory at a time (parts are bounded by ARCHIVER_SEGMENT_ROWS and _BYTES).
 */
async function scanArchive(
  ctx: EraseContext,
  metadata: BucketMetadata,
  onPart: (rows: BucketRow[], format: ArchiveFormat) => Promise<void> | void,
): Promise<void> {
  const { recorded, manifestKey } = await requireSealedArchive(
    ctx.hotStore,
    metadata,
    `archived bucket ${describeBucket(metadata.id)} lacks a recorded payload or manifest`,
  );
  const archive = await verifyArchive(ctx.objectStore, manifestKey, {
    prefix: ctx.settings.archivePrefix,
    ...archiveExpectationsOf(metadata, recorded),
    verifyPayloadBytes: true,
    tempDir: ctx.settings.tempDir,
  });
  for (const part of archive.parts) {
    const source = await verifiedObjectSource(ctx.objectStore, part, `in manifest ${manifestKey}`, {
      tempDir: ctx.settings.tempDir,
    });
    const rows: BucketRow[] = [];
    try {
      for await (const batch of readRecordBatches(source, recorded.format))
        for (const r of batch)
          rows.push({ eventTime: r.eventTime, sortKey: r.sortKey, value: r.value });
    } finally {
      await source.close();
    }
    await onPart(rows, recorded.format);
  }
}

/** Points 1 to 5 for one archived bucket. */
export async function eraseArchivedBucket(
  unleased: EraseContext,
  store: ErasureStore,
  jobId: string,
  id: BucketId,
  range: ErasureRange,
): Promise<ArchiveErasure> {
  const taken = await takeBucketLease(unleased, id);
  if (taken.kind === "missing") return { kind: "untouched" };
  if (taken.kind === "busy")
    return {
      kind: "pending",
      reason: `leased until ${taken.metadata.leaseExpiresAt?.toISOString() ?? "?"}`,
    };
  const { metadata, heartbeat } = taken;
  const before = { manifestKey: metadata.manifestKey ?? "", generation: metadata.generation - 1 };
  const inFlight = metadata.state === "archived" ? archivedInFlight(metadata) : metadata.state;
  if (inFlight !== null) {
    await unleased.hotStore.releaseLease(heartbeat.lease);
    return { kind: "pending", reason: inFlight };
  }
  const ctx = underLease(unleased, heartbeat.signal);
  heartbeat.start();
  try {
    const table = await ctx.hotStore.getTable(id.tableId);
    if (table === null) throw new UnknownTableError(id.tableId);
    // Point 2: what the range holds, from the verified archive; nothing to do without it.
    const removed = await countArchivedInRange(ctx, metadata, range);
    if (removed === 0) {
      await ctx.hotStore.releaseLease(heartbeat.lease);
      return { kind: "untouched" };
    }
    // Point 3: one new part per old part that keeps records (at least one part).
    const parts: BucketPart[] = [];
    let format: ArchiveFormat | undefined;
    const writePart = async (rows: BucketRow[]) => {
      const stored = await storePayload({
        store: ctx.objectStore,
        prefix: ctx.settings.archivePrefix,
        bucket: id,
        format: format!,
        attempt: { generation: heartbeat.lease.generation, ownerToken: heartbeat.lease.token },
        rows: batchesOf(rows),
        tempDir: ctx.settings.tempDir,
        storageClass: table.storageClass ?? undefined,
      });
      parts.push({
        index: parts.length,
        key: stored.key,
        sha256: stored.sha256,
        rowCount: stored.rowCount,
        byteLength: stored.byteLength,
        first: positionOf(rows[0]),
        last: positionOf(rows[rows.length - 1]),
      });
    };
    await scanArchive(ctx, metadata, async (rows, partFormat) => {
      format = partFormat;
      const keep = rows.filter((r) => !inRange(r.eventTime, range));
      if (keep.length > 0) await writePart(keep);
    });
    if (parts.length === 0) await writePart([]);
    const lease = heartbeat.lease;
    const manifestKey = await sealArchiveManifest({
      store: ctx.objectStore,
      prefix: ctx.settings.archivePrefix,
      bucket: id,
      strategy: metadata.strategy,
      start: metadata.start,
      end: metadata.end,
      generation: lease.generation,
      format: format!,
      parts,
    });
    // Point 4: the cutover, with its receipt line.
    await commitFenced(
      ctx,
      lease,
      "publish erased version",
      () =>
        store.publishErasedVersion(
          jobId,
          heartbeat.lease,
          ctx.clock.now(),
          before,
          { parts, manifestKey },
          removed,
        ),
      (m) => m.manifestKey === manifestKey && m.ownerToken === null,
    );
    return { kind: "erased", removed };
  } catch (error) {
    if (error instanceof LeaseLostError || heartbeat.signal.aborted)
      return { kind: "pending", reason: `lease lost: ${String(error)}` };
    await unleased.hotStore.releaseLease(heartbeat.lease).catch(() => undefined);
    throw error;
  } finally {
    await heartbeat.stop();
  }
}

async function* batchesOf(rows: readonly BucketRow[]): AsyncIterable<readonly BucketRow[]> {
  for (let i = 0; i < rows.length; i += 1000) yield rows.slice(i, i + 1000);
  if (rows.length === 0) yield [];
}

function positionOf(row: BucketRow | undefined): ClusteringPosition | null {
  return row === undefined ? null : { eventTime: row.eventTime, sortKey: row.sortKey };
}
