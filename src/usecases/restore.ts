/**
 * Restore: copy an archived bucket's records back into the hot store and
 * route its reads to the hot store again, so an operator can correct
 * history and let the bucket be archived anew.
 *
 * Invariant: a reader sees either the whole archive or the whole set of
 * restored hot rows, never a mix and never a partial copy; and the rows that
 * come back are exactly the archive's, each once.
 *
 * Ordering argument:
 *
 * 1. Take the bucket's lease and verify the archive in full (manifest,
 *    payload SHA-256, length, decoded rows) before changing anything, so a
 *    corrupt archive is refused with the bucket untouched.
 * 2. Mark the bucket as being restored (still archived: reads stay on the
 *    manifest, appends stay refused, cleanup is fenced off so it cannot
 *    delete what is being written back).
 * 3. Insert the records in batches, each one transaction that locks the
 *    metadata row under the live lease first: a stale owner can never insert
 *    after a takeover. Inserts are idempotent (present rows must hold equal
 *    values), so a takeover after a crash simply starts again from the top.
 * 4. Flip the route to hot in one conditional statement that also checks the
 *    hot row count equals the recorded payload row count. Before this commit
 *    every read goes to the archive; after it, to a hot store that holds every
 *    row. Flipping first would serve a partial bucket; inserting without the
 *    mark would let cleanup delete the rows as they arrive. Just before the
 *    flip, the bucket's query catalog entry is removed: after the flip the
 *    payloads it names are no longer referenced and garbage collection may
 *    delete them (see usecases/catalog.ts).
 *
 * The flip clears payload, manifest and hot_deleted, resets the phase to
 * claim and sets a retry time, so discovery leaves the bucket hot for the
 * hold period. It also clears a quarantine and resets the attempts: a
 * restore is the operator's fresh start, and a bucket left quarantined would
 * never be archived again after its hold. The archive objects it no longer
 * references are removed by garbage collection once they are older than its
 * safety age.
 */
import { describeBucket, type BucketId } from "../domain/bucket.js";
import { showBucket } from "../domain/display.js";
import { toBase64 } from "../domain/record.js";
import {
  CorruptBucketError,
  InvalidInputError,
  InvariantViolationError,
  LeaseLostError,
  UnknownBucketError,
} from "../errors.js";
import { readRecordBatches } from "../archive/payload-reader.js";
import { verifiedObjectSource } from "../archive/verified-object.js";
import { verifyArchive, type VerifiedArchiveParts } from "../archive/segments.js";
import {
  archiveExpectationsOf,
  requireSealedArchive,
  type RecordedArchive,
} from "./phases/recorded-archive.js";
import type {
  BucketLeases,
  BucketMetadata,
  BucketRestore,
  BucketRow,
  HotReads,
} from "../ports/hot-store.js";
import type { WorkItem } from "../ports/work-queue.js";
import type { ArchiverContext } from "./context.js";
import { takeBucketLease } from "./bucket-lease.js";
import { underLease, type UnderLease } from "./under-lease.js";
import type { LeaseHeartbeat } from "./heartbeat.js";
import { commitFenced } from "./phases/step.js";
import { catalogPortsOf, removeCatalogEntry } from "./catalog.js";
import {
  readWorkItemWithOption,
  workItemOptionForm,
  type WorkItemOption,
} from "./work-item-request.js";

/** The hot store roles a restore touches. */
type RestoreContext = ArchiverContext<HotReads & BucketLeases & BucketRestore>;
/** Its ports once it holds the lease: bound to the heartbeat's signal (usecases/under-lease.ts). */
type LeasedRestoreContext = ArchiverContext<UnderLease<HotReads & BucketLeases & BucketRestore>>;

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
export const MAX_RESTORE_HOLD_SECONDS = 366 * 86_400;

export interface RestoreOptions {
  /** Keep the restored bucket out of archival this long. */
  readonly holdMs: number;
  readonly batchRows?: number;
  readonly batchBytes?: number;
}

export type RestoreResult =
  /** The route is hot again and every archived row is in the hot store. */
  | "restored"
  /** The bucket was already hot (a repeated request, or never archived): nothing changed. */
  | "already-hot"
  /** Another worker holds the lease; try again after it expires. */
  | "busy"
  /** The lease was lost mid-restore; the bucket stays archived and marked; run again. */
  | "lease-lost";

export interface RestoreReport {
  readonly bucket: {
    readonly table_id: string;
    readonly partition_key_b64: string;
    readonly bucket_key: string;
  };
  readonly result: RestoreResult;
  /** True when an earlier, interrupted restore was resumed. */
  readonly resumed: boolean;
  readonly manifest_key: string | null;
  readonly rows_inserted: number;
  /** Rows that were already present with equal values (resumed or cleanup-pending buckets). */
  readonly rows_verified: number;
  readonly retry_at: string | null;
  readonly reason?: string;
}

/** A bucket that is being archived right now cannot be restored. */
export class BucketNotRestorableError extends InvalidInputError {}

export async function restoreBucket(
  unleased: RestoreContext,
  id: BucketId,
  options: RestoreOptions,
): Promise<RestoreReport> {
  const taken = await leaseForRestore(unleased, id);
  if (taken.kind === "report") return taken.report;
  const { metadata, heartbeat, recorded, manifestKey } = taken;
  const resumed = metadata.restoreStartedAt !== null;
  const ctx = underLease(unleased, heartbeat.signal);
  heartbeat.start();
  try {
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
      () => ctx.hotStore.beginRestore(heartbeat.lease, ctx.clock.now()),
      (m) => m.restoreStartedAt !== null && m.generation === lease.generation,
    );

    const copied = await insertArchivedRows(ctx, heartbeat, archive, recorded.format, options);
    await removeCatalogEntry(catalogPortsOf(ctx), metadata);
    const retryAt = new Date(ctx.clock.now().getTime() + options.holdMs);
    await flipToHot(ctx, heartbeat, retryAt);
    ctx.log.info("bucket restored to the hot store", {
      bucket: describeBucket(id),
      rows_inserted: copied.inserted,
      rows_verified: copied.verified,
      retry_at: retryAt.toISOString(),
    });
    return restoreReport(id, "restored", {
      resumed,
      manifest_key: manifestKey,
      rows_inserted: copied.inserted,
      rows_verified: copied.verified,
      retry_at: retryAt.toISOString(),
    });
  } catch (error) {
    if (error instanceof LeaseLostError || heartbeat.signal.aborted) {
      const reason = error instanceof Error ? error.message : String(error);
      return restoreReport(id, "lease-lost", { resumed, manifest_key: manifestKey, reason });
    }
    // Free the bucket at once; the restore mark (if set) keeps reads on the archive until a rerun.
    await unleased.hotStore.releaseLease(heartbeat.lease).catch(() => undefined);
    throw error;
  } finally {
    await heartbeat.stop();
  }
}

function restoreReport(
  id: BucketId,
  result: RestoreResult,
  fields: Partial<Omit<RestoreReport, "bucket" | "result">> = {},
): RestoreReport {
  return {
    bucket: {
      table_id: id.tableId,
      partition_key_b64: toBase64(id.partitionKey),
      bucket_key: id.bucketKey,
    },
    result,
    resumed: false,
    manifest_key: null,
    rows_inserted: 0,
    rows_verified: 0,
    retry_at: null,
    ...fields,
  };
}

/**
 * The bucket's lease (heartbeat not started) with its sealed archive, or the
 * report that ends the restore before anything changes: already hot, or busy.
 * An unknown, archiving or corrupt bucket is an error, with the lease released.
 */
async function leaseForRestore(
  ctx: RestoreContext,
  id: BucketId,
): Promise<
  | { readonly kind: "report"; readonly report: RestoreReport }
  | {
      readonly kind: "leased";
      readonly metadata: BucketMetadata;
      readonly heartbeat: LeaseHeartbeat;
      readonly recorded: RecordedArchive;
      readonly manifestKey: string;
    }
> {
  const before = await ctx.hotStore.getBucket(id);
  if (before === null) throw new UnknownBucketError(describeBucket(id));
  if (before.state === "hot") {
    return {
      kind: "report",
      report: restoreReport(id, "already-hot", {
        reason: "the bucket is hot: reads already go to the hot store",
      }),
    };
  }
  if (before.state === "archiving") throw notRestorable(id);
  if (before.state === "expired" || before.expiryStartedAt !== null)
    throw expiredNotRestorable(before);

  const acquisition = await takeBucketLease(ctx, id);
  if (acquisition.kind === "missing") throw new UnknownBucketError(describeBucket(id));
  if (acquisition.kind === "busy") {
    const until = acquisition.metadata.leaseExpiresAt?.toISOString() ?? "?";
    return {
      kind: "report",
      report: restoreReport(id, "busy", { reason: `leased until ${until}` }),
    };
  }
  const { metadata, heartbeat } = acquisition;
  try {
    if (metadata.state === "hot") {
      await ctx.hotStore.releaseLease(heartbeat.lease);
      return { kind: "report", report: restoreReport(id, "already-hot") };
    }
    if (metadata.state === "expired" || metadata.expiryStartedAt !== null)
      throw expiredNotRestorable(metadata);
    if (metadata.state !== "archived") throw notRestorable(id);
    const { recorded, manifestKey } = await requireSealedArchive(
      ctx.hotStore,
      metadata,
      `archived bucket ${describeBucket(id)} lacks a recorded payload or manifest`,
    );
    if (metadata.corruption !== null) {
      throw new CorruptBucketError(
        showBucket(id),
        manifestKey,
        metadata.corruption.at,
        metadata.corruption.problem,
      );
    }
    return { kind: "leased", metadata, heartbeat, recorded, manifestKey };
  } catch (error) {
    await ctx.hotStore.releaseLease(heartbeat.lease);
    throw error;
  }
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

function notRestorable(id: BucketId): BucketNotRestorableError {
  return new BucketNotRestorableError(
    `bucket ${describeBucket(id)}`,
    "is being archived right now",
    "an archived bucket; wait until `pulpitum status` shows it archived, then restore it",
  );
}

/** An expired bucket, or one being expired, has nothing a restore could bring back. */
function expiredNotRestorable(metadata: BucketMetadata): BucketNotRestorableError {
  const what =
    metadata.state === "expired"
      ? `expired at ${metadata.expiry?.at.toISOString() ?? "?"}: its records are gone for good (its table's expire_after)`
      : `is being expired since ${metadata.expiryStartedAt?.toISOString() ?? "?"} (its table's expire_after passed)`;
  return new BucketNotRestorableError(
    `bucket ${describeBucket(metadata.id)}`,
    what,
    "a bucket that has not expired; to keep buckets longer, lengthen or unset the table's expire_after (`pulpitum tables alter TABLE --expire-after DURATION|none`) before they are due",
  );
}

const HOLD_SECONDS_OPTION: WorkItemOption = {
  field: "hold_seconds",
  fallback: DEFAULT_RESTORE_HOLD_SECONDS,
  min: 0,
  max: MAX_RESTORE_HOLD_SECONDS,
};

export const RESTORE_REQUEST_FORM = workItemOptionForm(HOLD_SECONDS_OPTION);

export interface RestoreRequest {
  readonly item: WorkItem;
  readonly holdSeconds: number;
}

/** Validate a restore invocation: the work message fields plus an optional `hold_seconds`. */
export function parseRestoreRequest(value: unknown, input = "restore request"): RestoreRequest {
  const { item, option } = readWorkItemWithOption(value, input, HOLD_SECONDS_OPTION);
  return { item, holdSeconds: option };
}
