/**
 * `pulpitum erase`: remove one partition's records in an event-time range
 * from every bucket of a table, hot and archived, as a durable job with a
 * receipt (docs/erasure.md).
 *
 * Invariant: no record of another partition, and no record of this one
 * outside the range, is ever removed; once the job is `done`, no bucket of
 * the partition holds a record in the range (hot rows, published parts);
 * a record erased never comes back.
 *
 * Ordering argument:
 *
 * 1. The job is recorded before any bucket is touched, so a crash leaves a
 *    job that the same command finds and resumes (it looks for an unfinished
 *    job of the same table, partition and range first).
 * 2. Buckets are taken oldest first, each on its own: a hot bucket by one
 *    transaction under its append fence (usecases' port eraseHotRange), an
 *    archived one by a new archive version under its lease
 *    (usecases/erase-archive.ts). Each removal commits with its receipt
 *    line, so a crash between buckets loses no count and a rerun redoes
 *    nothing already done (a hot delete finds nothing; an archived bucket
 *    whose receipt names its current manifest is skipped).
 * 3. A bucket in flight (archiving, cleanup pending, being restored, leased,
 *    marked corrupt) is recorded `pending` and left alone: its records are
 *    still wholly in one tier the next run will erase from. The job ends
 *    `pending` until a run finds every bucket done.
 * 4. A hot bucket claimed between the read and the delete is found not hot
 *    by the delete's fence and re-read once: archiving makes it pending.
 * 5. An expired bucket holds none of the partition's records: done, 0
 *    removed. One marked for expiry still serves its archive: pending until
 *    the expiry finishes.
 * 6. Every settled archived bucket in range has its query catalog entry
 *    rewritten from what it publishes (one this job published, one an
 *    earlier job published and failed to catalog, or one left stale by
 *    anything else): its line stays `pending` until that write succeeded,
 *    so the job is `done` only once `pulpitum query` and Athena read every
 *    version it published, and a rerun puts right every stale entry.
 */
import { randomUUID } from "node:crypto";
import { describeBucket, type BucketId } from "../domain/bucket.js";
import { toBase64 } from "../domain/record.js";
import type { TableId } from "../domain/table.js";
import { errorMessage, InvalidInputError, UnknownTableError } from "../errors.js";
import type {
  ErasureJobStatus,
  ErasureRange,
  ErasureReceiptLine,
  ErasureStore,
} from "../ports/erasure-store.js";
import type { BucketMetadata } from "../ports/hot-store.js";
import type { AuditConclusion } from "../ports/audit-trail.js";
import { catalogPortsOf, refreshCatalogEntry } from "./catalog.js";
import {
  archivedInFlight,
  countArchivedInRange,
  eraseArchivedBucket,
  type EraseContext,
} from "./erase-archive.js";

export interface EraseRequest {
  readonly tableId: TableId;
  readonly partitionKey: Uint8Array;
  readonly range: ErasureRange;
  /** Who asked (the audit trail's caller, as text). */
  readonly requestedBy: string;
  readonly dryRun: boolean;
  /**
   * Start no bucket at or after this time (a Lambda's time left, less a
   * margin): the buckets not reached are recorded pending and the job ends
   * `pending`, for the same request to resume.
   */
  readonly deadline?: Date;
}

/** Why a bucket was left for the next run when the run's deadline came first. */
export const DEADLINE_REASON = "not reached before this run's deadline: run the same erase again";

/** One bucket's line of the report (the receipt line, or what a dry run would do). */
export interface ErasureBucketReport {
  readonly bucket_key: string;
  readonly status: "done" | "pending" | "would-erase";
  readonly tier: "hot" | "archive";
  readonly generation_before: number | null;
  readonly manifest_before: string | null;
  readonly generation_after: number | null;
  readonly manifest_after: string | null;
  readonly records_removed: number;
  readonly records_kept: number | null;
  readonly reason: string | null;
}

export interface ErasureReport {
  /** Null for a dry run: it records nothing. */
  readonly job_id: string | null;
  readonly table_id: string;
  readonly partition_key_b64: string;
  readonly from: string | null;
  readonly to: string | null;
  readonly dry_run: boolean;
  readonly status: ErasureJobStatus | "dry-run";
  readonly resumed: boolean;
  readonly records_removed: number;
  readonly buckets_pending: number;
  readonly buckets: readonly ErasureBucketReport[];
}

/** Why a bucket cannot be erased now, or null when it can (hot, expired or settled archived). */
function inFlight(metadata: BucketMetadata): string | null {
  if (metadata.state === "hot" || metadata.state === "expired") return null;
  if (metadata.state === "archiving")
    return `being archived (phase ${metadata.phase}): taken once it is archived`;
  return archivedInFlight(metadata);
}

/** Whether an earlier run's receipt line already covers the bucket as it is now (same published version). */
function doneFor(previous: ErasureReceiptLine | undefined, metadata: BucketMetadata): boolean {
  return previous?.status === "done" && previous.manifestAfter === metadata.manifestKey;
}

function tierOf(metadata: BucketMetadata): "hot" | "archive" {
  return metadata.state === "hot" ? "hot" : "archive";
}

export async function eraseKey(
  ctx: EraseContext,
  store: ErasureStore,
  request: EraseRequest,
): Promise<ErasureReport> {
  const table = await ctx.hotStore.getTable(request.tableId);
  if (table === null) throw new UnknownTableError(request.tableId);
  const buckets = await ctx.hotStore.listPartitionBuckets(request.tableId, request.partitionKey, {
    ...(request.range.from !== null && { from: request.range.from }),
    ...(request.range.to !== null && { to: request.range.to }),
  });
  // Before anything is written: an archive object under Object Lock refuses the whole job.
  await refuseLockedObjects(ctx, buckets);
  if (request.dryRun) return await dryRun(ctx, store, request, buckets);

  // Point 1.
  const found = await store.findUnfinishedJob(request.tableId, request.partitionKey, request.range);
  const job =
    found ??
    (await store.createJob({
      jobId: randomUUID(),
      tableId: request.tableId,
      partitionKey: request.partitionKey,
      range: request.range,
      requestedBy: request.requestedBy,
      now: ctx.clock.now(),
    }));
  if (found !== null) await store.setJobStatus(job.jobId, "running", ctx.clock.now());
  const done = new Map((await store.receipt(job.jobId)).map((l) => [l.bucketKey, l]));

  // Points 2 to 4.
  for (const listed of buckets) {
    const previous = done.get(listed.id.bucketKey);
    if (request.deadline !== undefined && ctx.clock.now() >= request.deadline) {
      // Past the deadline: the buckets left are pending (one cheap row each), so
      // the job cannot end `done`; one already done by an earlier run keeps its line.
      if (!doneFor(previous, listed))
        await store.recordPending(
          job.jobId,
          listed.id,
          tierOf(listed),
          DEADLINE_REASON,
          ctx.clock.now(),
        );
      continue;
    }
    await eraseBucket(ctx, store, job.jobId, listed, request.range, previous);
  }
  const lines = await store.receipt(job.jobId);
  const pending = lines.filter((l) => l.status === "pending").length;
  const status: ErasureJobStatus = pending > 0 ? "pending" : "done";
  await store.setJobStatus(job.jobId, status, ctx.clock.now());
  ctx.log.info("erasure job ran", { job_id: job.jobId, status, buckets_pending: pending });
  return report(request, job.jobId, status, found !== null, lines.map(lineReport));
}

/** The job is refused: an archived object it would replace cannot be removed before its retention ends. */
export class ErasureLockedError extends InvalidInputError {
  readonly objectKey: string;
  readonly retainUntil: Date | null;
  constructor(id: BucketId, objectKey: string, retainUntil: Date | null) {
    super(
      `erasure of ${describeBucket(id)}`,
      `its archive object ${objectKey} is under Object Lock ${
        retainUntil === null ? "(a legal hold)" : `until ${retainUntil.toISOString()}`
      }, so its bytes could not be removed; refused before anything changed`,
      `the erasure again after ${
        retainUntil === null ? "the legal hold is lifted" : retainUntil.toISOString()
      }, or the lock removed by a principal allowed to (GOVERNANCE mode; docs/erasure.md)`,
    );
    this.objectKey = objectKey;
    this.retainUntil = retainUntil;
  }
}

/**
 * Head every object the archived buckets in range publish (parts and
 * manifest): the first one under Object Lock refuses the job, naming its
 * retain-until date, before the job is recorded or anything written.
 */
async function refuseLockedObjects(
  ctx: EraseContext,
  buckets: readonly BucketMetadata[],
): Promise<void> {
  for (const metadata of buckets) {
    if (metadata.state !== "archived" || metadata.manifestKey === null) continue;
    const keys = [...(await ctx.hotStore.listParts(metadata.id)).map((p) => p.key)];
    keys.push(metadata.manifestKey);
    for (const key of keys) {
      const lock = lockedNow((await ctx.objectStore.head(key))?.objectLock, ctx.clock.now());
      if (lock !== undefined) throw new ErasureLockedError(metadata.id, key, lock.until);
    }
  }
}

async function eraseBucket(
  ctx: EraseContext,
  store: ErasureStore,
  jobId: string,
  listed: BucketMetadata,
  range: ErasureRange,
  previous: ErasureReceiptLine | undefined,
): Promise<void> {
  const id: BucketId = listed.id;
  let metadata: BucketMetadata | null = listed;
  for (let look = 0; metadata !== null && look < 2; look++) {
    const waiting = inFlight(metadata);
    if (waiting !== null) {
      if (doneFor(previous, metadata)) return;
      await store.recordPending(jobId, id, tierOf(metadata), waiting, ctx.clock.now());
      return;
    }
    if (metadata.state === "hot") {
      const erased = await store.eraseHotRange(jobId, id, range, ctx.clock.now());
      if (erased.kind === "erased") return;
      metadata = erased.metadata;
      continue;
    }
    if (metadata.state === "expired") {
      // Point 5: nothing of it is left to read or erase.
      const at = metadata.expiry?.at.toISOString() ?? "?";
      const reason = `expired at ${at}: it holds none of its records`;
      await store.recordUntouched(jobId, metadata, ctx.clock.now(), reason);
      return;
    }
    if (!doneFor(previous, metadata)) {
      const outcome = await eraseArchivedBucket(ctx, store, jobId, id, range);
      if (outcome.kind === "pending") {
        await store.recordPending(jobId, id, "archive", outcome.reason, ctx.clock.now());
        return;
      }
      if (outcome.kind === "untouched")
        await store.recordUntouched(jobId, metadata, ctx.clock.now());
    }
    await catalogSettledBucket(ctx, store, jobId, id);
    return;
  }
}

/** Point 6: rewrite the bucket's catalog entry; a failure leaves its line pending for the next run. */
async function catalogSettledBucket(
  ctx: EraseContext,
  store: ErasureStore,
  jobId: string,
  id: BucketId,
): Promise<void> {
  try {
    await refreshCatalogEntry(catalogPortsOf(ctx), id);
  } catch (error) {
    const reason =
      `its query catalog entry could not be rewritten (${errorMessage(error)}), so ` +
      "`pulpitum query` cannot read it: run the same erase again";
    ctx.log.warn("catalog entry not rewritten after erasure", {
      bucket: describeBucket(id),
      error: errorMessage(error),
    });
    await store.recordPending(jobId, id, "archive", reason, ctx.clock.now());
  }
}

async function dryRun(
  ctx: EraseContext,
  store: ErasureStore,
  request: EraseRequest,
  buckets: readonly BucketMetadata[],
): Promise<ErasureReport> {
  const lines: ErasureBucketReport[] = [];
  for (const metadata of buckets) {
    if (metadata.state === "expired") continue;
    const waiting = inFlight(metadata);
    const archived = metadata.state === "archived" && waiting === null;
    const count = archived
      ? await countArchivedInRange(ctx, metadata, request.range)
      : await store.countHotInRange(metadata.id, request.range);
    if (count === 0 && waiting === null) continue;
    lines.push({
      bucket_key: metadata.id.bucketKey,
      status: waiting === null ? "would-erase" : "pending",
      tier: tierOf(metadata),
      generation_before: metadata.generation,
      manifest_before: metadata.manifestKey,
      generation_after: null,
      manifest_after: null,
      records_removed: count,
      records_kept: null,
      reason: waiting,
    });
  }
  return report(request, null, "dry-run", false, lines);
}

function lineReport(line: ErasureReceiptLine): ErasureBucketReport {
  return {
    bucket_key: line.bucketKey,
    status: line.status,
    tier: line.tier,
    generation_before: line.generationBefore,
    manifest_before: line.manifestBefore,
    generation_after: line.generationAfter,
    manifest_after: line.manifestAfter,
    records_removed: line.recordsRemoved,
    records_kept: line.recordsKept,
    reason: line.reason,
  };
}

function report(
  request: EraseRequest,
  jobId: string | null,
  status: ErasureReport["status"],
  resumed: boolean,
  buckets: ErasureBucketReport[],
): ErasureReport {
  return {
    job_id: jobId,
    table_id: request.tableId,
    partition_key_b64: toBase64(request.partitionKey),
    from: request.range.from?.toISOString() ?? null,
    to: request.range.to?.toISOString() ?? null,
    dry_run: request.dryRun,
    status,
    resumed,
    records_removed: buckets.reduce((sum, b) => sum + b.records_removed, 0),
    buckets_pending: buckets.filter((b) => b.status === "pending").length,
    buckets,
  };
}

/** The audit record of a run: the job, its status and its whole receipt. */
export function erasureConclusion(report: ErasureReport): AuditConclusion {
  return {
    outcome: report.status === "pending" ? "pending" : "done",
    reason:
      report.status === "pending"
        ? `${`${report.buckets_pending} bucket${report.buckets_pending === 1 ? "" : "s"}`} in flight: run the same erase again`
        : null,
    count: report.records_removed,
    result: {
      job_id: report.job_id,
      status: report.status,
      records_removed: report.records_removed,
      buckets: report.buckets,
    },
  };
}

/** The lock protecting an object now (a legal hold, or a retention not yet ended), or undefined. */
function lockedNow(
  lock: { readonly legalHold: boolean; readonly retainUntil: Date | null } | undefined,
  now: Date,
): { until: Date | null } | undefined {
  if (lock === undefined) return undefined;
  if (lock.legalHold) return { until: null };
  const until = lock.retainUntil;
  return until !== null && until.getTime() > now.getTime() ? { until } : undefined;
}
