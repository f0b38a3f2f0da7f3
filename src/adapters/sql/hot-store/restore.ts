/**
 * Restore: an archived bucket's rows written back to the hot store under
 * {@link RESTORE_FENCE}, then the bucket returned to `hot` only once the hot
 * rows match the payload's row count.
 */
import type { CutOffRestores } from "../../../ports/hot-store-operations.js";
import { parseBucketKey } from "../../../domain/bucket.js";
import type { TableId } from "../../../domain/table.js";
import type {
  BucketRow,
  FencedWrite,
  FinishRestore,
  Lease,
  RestoreBatch,
} from "../../../ports/hot-store.js";
import type { SqlDatabase, SqlExecutor } from "../database.js";
import { METADATA_TABLE, RECORDS_TABLE } from "../migrations.js";
import {
  fencedTransaction,
  fencedUpdate,
  holdsLiveLease,
  leaseLost,
  lockUnderFence,
} from "./fenced-update.js";
import {
  BUCKET,
  LIVE_LEASE,
  NO_LIVE_LEASE,
  PROGRESS,
  RELEASE_LEASE,
  RESTORE_FENCE,
} from "./fences.js";
import { SqlParams } from "./params.js";
import { deleteParts } from "./parts.js";
import {
  bucketIdOf,
  METADATA_COLUMNS,
  sqlDate,
  sqlDateOrNull,
  type BucketKeyRow,
  type MetadataRow,
} from "./rows.js";
import { countHotRows } from "./reads.js";
import {
  compareExisting,
  identityKey,
  insertRecords,
  statementChunks,
  type PendingBucket,
  type PendingRecord,
} from "./record-writes.js";

export async function beginRestore(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  holdMs?: number,
): Promise<FencedWrite> {
  return await fencedUpdate(
    db,
    "beginRestore",
    lease,
    now,
    (p) =>
      `restore_started_at = COALESCE(restore_started_at, ${p.time(now)}), ` +
      `restore_hold_ms = ${holdMs === undefined ? "restore_hold_ms" : p.int(holdMs)}`,
    () =>
      `state = 'archived' AND manifest_key IS NOT NULL AND payload_rows IS NOT NULL AND expiry_started_at IS NULL`,
  );
}

export async function restoreRecords(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  rows: readonly BucketRow[],
): Promise<RestoreBatch> {
  const id = lease.bucket;
  const bucket: PendingBucket = { id, descriptor: parseBucketKey(id.bucketKey) };
  const result = await db.transaction(async (tx) => {
    // The restore fence first: a takeover's acquireLease waits for this
    // transaction, so no stale owner inserts.
    if (!(await lockUnderFence(tx, id, (f) => RESTORE_FENCE(f, lease, now)))) return null;
    const pending: PendingRecord[] = rows.map((row) => ({
      bucket,
      record: { partitionKey: id.partitionKey, ...row },
      identity: identityKey(id.partitionKey, id.bucketKey, row.eventTime, row.sortKey),
    }));
    let inserted = 0;
    let verified = 0;
    for (const chunk of statementChunks(pending)) {
      const stored = await insertRecords(tx, id.tableId, chunk);
      inserted += stored.size;
      const skipped = chunk.filter((r) => !stored.has(r.identity));
      if (skipped.length > 0) await compareExisting(tx, id.tableId, skipped);
      verified += skipped.length;
    }
    return { inserted, verified };
  }, "restoreRecords");
  if (result === null) return await leaseLost(db, id);
  return { kind: "inserted", ...result };
}

export async function finishRestore(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  retryAt: Date,
): Promise<FinishRestore> {
  // One transaction: the fenced UPDATE locks the row, and a segmented
  // bucket's part records go with its payload facts.
  const id = lease.bucket;
  const result = await fencedTransaction(db, "finishRestore", id, async (tx) => {
    const p = new SqlParams();
    const { rows } = await tx.query<MetadataRow>(
      `UPDATE ${METADATA_TABLE}
          SET state = 'hot', phase = 'claim', payload_key = NULL, payload_sha256 = NULL,
              payload_rows = NULL, payload_bytes = NULL, payload_parts = NULL,
              manifest_key = NULL, hot_deleted = false, restore_started_at = NULL,
              restore_hold_ms = NULL,
              dereferenced_at = ${p.time(now)}, ${PROGRESS}, outage_deferrals = 0,
              quarantined_at = NULL, quarantine_retry_at = NULL, retry_at = ${p.time(retryAt)}, last_error = NULL,
              verified_at = NULL, corrupt_at = NULL, corrupt_problem = NULL,
              enqueued_at = NULL, ${RELEASE_LEASE}, updated_at = ${p.time(now)}
        WHERE ${BUCKET(p, id)} AND ${LIVE_LEASE(p, lease, now)}
          AND state = 'archived' AND restore_started_at IS NOT NULL
          AND payload_rows = (SELECT count(*) FROM ${RECORDS_TABLE} WHERE ${BUCKET(p, id)})
    RETURNING ${METADATA_COLUMNS}`,
      p.values,
    );
    if (rows[0] === undefined) return null;
    await deleteParts(tx, id);
    return rows[0];
  });
  if (result.kind === "committed") return result;
  const m = result.metadata;
  if (
    m !== null &&
    m.state === "archived" &&
    m.restoreStartedAt !== null &&
    holdsLiveLease(m, lease, now)
  ) {
    return {
      kind: "rows-mismatch",
      hotRows: await countHotRows(db, lease.bucket),
      expected: m.exported?.rowCount ?? 0,
    };
  }
  return result;
}

/** See BucketRestore.cutOffRestores: the marked rows alone (the restoring index). */
export async function cutOffRestores(
  db: SqlExecutor,
  now: Date,
  options: { tableId?: TableId; limit: number },
): Promise<CutOffRestores> {
  const where = (p: SqlParams) =>
    `restore_started_at IS NOT NULL AND state = 'archived' AND ${NO_LIVE_LEASE(p.time(now))}` +
    (options.tableId === undefined ? "" : ` AND table_id = ${p.text(options.tableId)}`);
  const c = new SqlParams();
  const { rows: counted } = await db.query<{ n: string | number; oldest: string | null }>(
    `SELECT count(*) AS n, min(restore_started_at) AS oldest FROM ${METADATA_TABLE} WHERE ${where(c)}`,
    c.values,
  );
  const p = new SqlParams();
  const { rows } = await db.query<
    BucketKeyRow & { restore_started_at: string; quarantined: boolean }
  >(
    `SELECT table_id, partition_key, bucket_key, restore_started_at,
            (quarantined_at IS NOT NULL) AS quarantined
       FROM ${METADATA_TABLE} WHERE ${where(p)}
      ORDER BY restore_started_at, table_id, partition_key, bucket_key
      LIMIT ${p.int(options.limit)}`,
    p.values,
  );
  return {
    total: Number(counted[0]?.n ?? 0),
    oldestMarkedAt: sqlDateOrNull(counted[0]?.oldest ?? null),
    buckets: rows.map((r) => ({
      id: bucketIdOf(r),
      markedAt: sqlDate(r.restore_started_at),
      quarantined: r.quarantined,
    })),
  };
}
