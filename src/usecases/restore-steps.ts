/**
 * The steps of a restore once its lease is held (points 1 to 4 of
 * usecases/restore.ts): verify the archive, mark the bucket, copy its rows
 * back, empty its catalog entry and flip its route to hot. Run by the
 * operator's restore (`pulpitum restore`, the restore function) and by a
 * worker finishing a restore that was cut off after its mark
 * (usecases/phases/finish-restore.ts): every step is idempotent under a new
 * lease, so the finish is the same steps from the top.
 */
import { describeBucket } from "../domain/bucket.js";
import { InvariantViolationError } from "../errors.js";
import { readRecordBatches } from "../archive/payload-reader.js";
import { verifiedObjectSource } from "../archive/verified-object.js";
import { verifyArchive, type VerifiedArchiveParts } from "../archive/segments.js";
import { archiveExpectationsOf, type RecordedArchive } from "./phases/recorded-archive.js";
import type {
  BucketLeases,
  BucketMetadata,
  BucketRestore,
  BucketRow,
  HotReads,
} from "../ports/hot-store.js";
import type { ArchiverContext } from "./context.js";
import type { UnderLease } from "./under-lease.js";
import type { LeaseHeartbeat } from "./heartbeat.js";
import { commitFenced } from "./phases/step.js";
import { catalogPortsOf, removeCatalogEntry } from "./catalog.js";

/** A restore's ports once it holds the lease: bound to the heartbeat's signal (usecases/under-lease.ts). */
export type LeasedRestoreContext = ArchiverContext<
  UnderLease<HotReads & BucketLeases & BucketRestore>
>;

/** Rows per restore transaction by default. */
export const DEFAULT_RESTORE_BATCH_ROWS = 1000;
/**
 * Keys and values per restore transaction by default: whatever the value
 * sizes, one transaction stays small enough to commit quickly and to redo
 * on a serialization retry (its statements are cut smaller by the adapter).
 */
export const DEFAULT_RESTORE_BATCH_BYTES = 16 * 1024 * 1024;
/** How long a restored bucket stays hot before discovery may archive it again, by default: 7 days. */
export const DEFAULT_RESTORE_HOLD_SECONDS = 7 * 86_400;

export interface RestoreOptions {
  /** Keep the restored bucket out of archival this long (recorded with the mark). */
  readonly holdMs: number;
  readonly batchRows?: number;
  readonly batchBytes?: number;
}

/** What the steps did: the rows copied back, and when the bucket may be archived again. */
export interface RestoreSteps {
  readonly inserted: number;
  readonly verified: number;
  readonly retryAt: Date;
}

/**
 * Points 1 to 4 under the held lease (its heartbeat started): the whole
 * archive verified, the mark (with the hold) committed, every row inserted
 * or found equal, the catalog entry emptied, and the route flipped to hot.
 * Throws LeaseLostError when the lease is lost, and any failure as is: the
 * bucket then stays archived and marked, its reads on the archive, for a
 * rerun or a worker to finish.
 */
export async function restoreUnderLease(
  ctx: LeasedRestoreContext,
  heartbeat: LeaseHeartbeat,
  metadata: BucketMetadata,
  sealed: { readonly recorded: RecordedArchive; readonly manifestKey: string },
  options: RestoreOptions,
): Promise<RestoreSteps> {
  const { recorded, manifestKey } = sealed;
  // Point 1: the whole archive is verified before anything changes.
  const archive = await verifyArchive(ctx.objectStore, manifestKey, {
    prefix: ctx.settings.archivePrefix,
    ...archiveExpectationsOf(metadata, recorded),
    verifyPayloadBytes: true,
    tempDir: ctx.settings.tempDir,
  });
  const lease = heartbeat.lease;
  await commitFenced(
    ctx,
    lease,
    "begin restore",
    () => ctx.hotStore.beginRestore(heartbeat.lease, ctx.clock.now(), options.holdMs),
    (m) => m.restoreStartedAt !== null && m.generation === lease.generation,
  );

  const copied = await insertArchivedRows(ctx, heartbeat, archive, recorded.format, options);
  await removeCatalogEntry(catalogPortsOf(ctx), metadata);
  const retryAt = new Date(ctx.clock.now().getTime() + options.holdMs);
  await flipToHot(ctx, heartbeat, retryAt);
  return { ...copied, retryAt };
}

/**
 * Point 3: every archived row into the hot store, in transactions of at most
 * `batchRows` rows and `batchBytes` keys and values, each fenced by the live
 * lease. Each part is read from a copy checked again (the verification read
 * another copy).
 */
async function insertArchivedRows(
  ctx: LeasedRestoreContext,
  heartbeat: LeaseHeartbeat,
  archive: VerifiedArchiveParts,
  format: RecordedArchive["format"],
  options: RestoreOptions,
): Promise<{ inserted: number; verified: number }> {
  const batchRows = options.batchRows ?? DEFAULT_RESTORE_BATCH_ROWS;
  const batchBytes = options.batchBytes ?? DEFAULT_RESTORE_BATCH_BYTES;
  const counts = { inserted: 0, verified: 0 };
  let pending: BucketRow[] = [];
  let pendingBytes = 0;
  const flush = async (): Promise<void> => {
    if (pending.length === 0) return;
    const batch = await ctx.hotStore.restoreRecords(heartbeat.lease, ctx.clock.now(), pending);
    pending = [];
    pendingBytes = 0;
    counts.inserted += batch.inserted;
    counts.verified += batch.verified;
  };
  for (const part of archive.parts) {
    const source = await verifiedObjectSource(
      ctx.objectStore,
      part,
      `in manifest ${archive.manifestKey}`,
      { tempDir: ctx.settings.tempDir },
    );
    try {
      for await (const records of readRecordBatches(source, format)) {
        for (const r of records) {
          pending.push({ eventTime: r.eventTime, sortKey: r.sortKey, value: r.value });
          pendingBytes += r.sortKey.byteLength + r.value.byteLength;
          const full = pending.length >= batchRows || pendingBytes >= batchBytes;
          if (full) await flush();
        }
      }
    } finally {
      await source.close();
    }
  }
  await flush();
  return counts;
}

/**
 * Point 4: the route flips to hot in one fenced statement that also checks
 * the hot row count against the archive's.
 */
async function flipToHot(
  ctx: LeasedRestoreContext,
  heartbeat: LeaseHeartbeat,
  retryAt: Date,
): Promise<void> {
  const lease = heartbeat.lease;
  const id = lease.bucket;
  await commitFenced(
    ctx,
    lease,
    "finish restore",
    async () => {
      const result = await ctx.hotStore.finishRestore(heartbeat.lease, ctx.clock.now(), retryAt);
      if (result.kind === "rows-mismatch") {
        throw new InvariantViolationError(
          `restoring ${describeBucket(id)}: the hot store holds ${result.hotRows} rows after every ` +
            `archived row was inserted or verified, but the archive has ${result.expected}; ` +
            "the route stays on the archive",
        );
      }
      return result;
    },
    (m) => m.state === "hot" && m.generation === lease.generation && m.ownerToken === null,
  );
}
