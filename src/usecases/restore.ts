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
 * A restore cut off after its mark (its process died, it lost its lease,
 * or a step failed) leaves the bucket archived and marked, its reads on the
 * archive and its catalog entry possibly emptied already; it is never left
 * that way: discovery offers it and a worker finishes it with the same
 * steps (usecases/phases/finish-restore.ts), honouring the hold recorded
 * with the mark. Until then `verify` and the scrub report it and the
 * RestoresCutOff alarm watches it.
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
  LeaseLostError,
  UnknownBucketError,
} from "../errors.js";
import { requireSealedArchive, type RecordedArchive } from "./phases/recorded-archive.js";
import type { BucketLeases, BucketMetadata, BucketRestore, HotReads } from "../ports/hot-store.js";
import type { WorkItem } from "../ports/work-queue.js";
import type { ArchiverContext } from "./context.js";
import { takeBucketLease } from "./bucket-lease.js";
import { underLease } from "./under-lease.js";
import type { LeaseHeartbeat } from "./heartbeat.js";
import {
  DEFAULT_RESTORE_HOLD_SECONDS,
  restoreUnderLease,
  type RestoreOptions,
} from "./restore-steps.js";
import {
  readWorkItemWithOption,
  workItemOptionForm,
  type WorkItemOption,
} from "./work-item-request.js";

export {
  DEFAULT_RESTORE_BATCH_BYTES,
  DEFAULT_RESTORE_BATCH_ROWS,
  DEFAULT_RESTORE_HOLD_SECONDS,
  type RestoreOptions,
} from "./restore-steps.js";

/** The hot store roles a restore touches. */
type RestoreContext = ArchiverContext<HotReads & BucketLeases & BucketRestore>;

export const MAX_RESTORE_HOLD_SECONDS = 366 * 86_400;

export type RestoreResult =
  /** The route is hot again and every archived row is in the hot store. */
  | "restored"
  /** The bucket was already hot (a repeated request, or never archived): nothing changed. */
  | "already-hot"
  /** Another worker holds the lease; try again after it expires. */
  | "busy"
  /** The lease was lost mid-restore; the bucket stays archived and marked, and a worker finishes it. */
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
    const copied = await restoreUnderLease(
      ctx,
      heartbeat,
      metadata,
      { recorded, manifestKey },
      options,
    );
    const retryAt = copied.retryAt;
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
    // Free the bucket at once: the restore mark (if set) keeps reads on the archive, and
    // discovery offers the bucket to a worker that finishes the restore.
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
