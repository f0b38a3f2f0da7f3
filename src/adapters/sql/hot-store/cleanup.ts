/**
 * Cleanup: deleting an archived bucket's hot rows in bounded batches under
 * {@link CLEANUP_FENCE}, then marking it `hot_deleted` once none remain. A
 * batch that deleted rows is progress (fences.ts, PROGRESS).
 */
import type {
  BucketMetadata,
  CleanupBatch,
  ClusteringPosition,
  FinishCleanup,
  Lease,
} from "../../../ports/hot-store.js";
import type { SqlDatabase } from "../database.js";
import { RECORDS_TABLE } from "../migrations.js";
import { fencedUpdate, holdsLiveLease, leaseLost, lockUnderFenceWithRun } from "./fenced-update.js";
import { BUCKET, CLEANUP_FENCE, NOT_RESTORING, RELEASE_LEASE } from "./fences.js";
import { deleteNextKeyRange } from "./key-range-delete.js";
import { endFailureRun } from "./parts.js";

export async function cleanupBatch(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  limit: number,
  after: ClusteringPosition | null = null,
): Promise<CleanupBatch> {
  const id = lease.bucket;
  const deleted = await db.transaction(async (tx) => {
    // The cleanup fence first. A restore (or any takeover) must update the
    // locked row to take the bucket, so whatever the isolation level, rows
    // are deleted only while the bucket is archived, not being restored,
    // and leased by us.
    const locked = await lockUnderFenceWithRun(tx, id, (f) => CLEANUP_FENCE(f, lease, now));
    if (locked === null) return null;
    const batch = await deleteNextKeyRange(tx, id, limit, after);
    if (batch.count > 0 && locked.inFailureRun) await endFailureRun(tx, id);
    return batch;
  }, "cleanupBatch");
  if (deleted === null) return await leaseLost(db, id);
  return deleted.last === undefined
    ? { kind: "deleted", count: deleted.count }
    : { kind: "deleted", count: deleted.count, last: deleted.last };
}

export async function finishCleanup(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
): Promise<FinishCleanup> {
  const result = await fencedUpdate(
    db,
    "finishCleanup",
    lease,
    now,
    () => `hot_deleted = true, phase = 'done', ${RELEASE_LEASE}`,
    (p) =>
      `state = 'archived' AND hot_deleted = false AND ${NOT_RESTORING()}
       AND NOT EXISTS (SELECT 1 FROM ${RECORDS_TABLE} WHERE ${BUCKET(p, lease.bucket)})`,
  );
  if (result.kind === "committed") return result;
  if (result.metadata !== null && holdsCleanupFence(result.metadata, lease, now)) {
    return { kind: "rows-remain" };
  }
  return result;
}

function holdsCleanupFence(metadata: BucketMetadata, lease: Lease, now: Date): boolean {
  return (
    metadata.state === "archived" &&
    !metadata.hotDeleted &&
    metadata.restoreStartedAt === null &&
    holdsLiveLease(metadata, lease, now)
  );
}
