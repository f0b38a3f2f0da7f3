/**
 * Removing a table from the hot store, in three steps whose correctness
 * rests on row locks, not on the isolation level.
 *
 * 1. Begin: lock the registration row, check that no bucket is in flight,
 *    and pause the table. From then on discovery offers none of its hot
 *    buckets and a claim is refused (claims recheck the pause in their own
 *    conditional statement), so a worker holding an old queue message cannot
 *    start archiving a bucket that is about to disappear.
 * 2. Each bucket is removed under its own lease, like cleanup: the batch
 *    locks the bucket's metadata row under the lease first, then deletes a
 *    key range of hot rows; the batch that finds no rows left deletes the
 *    metadata row. No phase can act on the bucket meanwhile (every phase
 *    needs the lease), and a takeover waits for the batch's lock.
 * 3. Finish: delete the registration only if no bucket row remains, under
 *    the registration's lock. An application still appending to the table
 *    creates buckets faster than they go; the caller sees `buckets-remain`
 *    and passes again instead of leaving rows of an unregistered table.
 *    Appends key-share-lock the registration row, so the final delete waits
 *    for every append in flight; under READ COMMITTED the check then sees
 *    their buckets, under SERIALIZABLE a racing append aborts the drop. At
 *    REPEATABLE READ the check reads the snapshot taken before that wait, so
 *    a bucket created by an append committing during the wait can outlive
 *    the registration: its rows stay, and running the drop again (it
 *    resumes on any bucket left) removes them.
 *
 * Unregistering first instead would let an unpaused claim of a queued
 * bucket archive it after the check, and would strand rows appended during
 * the drop under no registration at all.
 */
import type { TableId } from "../../../domain/table.js";
import type {
  BucketState,
  ClusteringPosition,
  Lease,
  RecordedPhase,
} from "../../../ports/hot-store.js";
import type {
  DropBatch,
  TableDropFinish,
  TableDropStart,
} from "../../../ports/hot-store-operations.js";
import type { SqlDatabase } from "../database.js";
import {
  METADATA_TABLE,
  POLICY_HISTORY_TABLE,
  RECORDS_TABLE,
  TABLES_TABLE,
} from "../migrations.js";
import { SOME_LIVE_LEASE, BUCKET, LIVE_LEASE } from "./fences.js";
import { lockUnderFence } from "./fenced-update.js";
import { deleteNextKeyRange } from "./key-range-delete.js";
import { SqlParams } from "./params.js";
import { deleteParts } from "./parts.js";
import { bucketIdOf, sqlDateOrNull, type BucketKeyRow } from "./rows.js";

/** How many in-flight buckets a refusal names. */
const IN_FLIGHT_SHOWN = 20;

interface InFlightRow extends BucketKeyRow {
  state: string;
  phase: string;
  hot_deleted: boolean;
  restoring: boolean;
  live_lease_expires_at: string | null;
}

/**
 * Pause `tableId` for its drop unless a bucket of it is in flight:
 * archiving, archived with cleanup pending, being restored, or under a live
 * lease.
 */
export async function beginTableDrop(
  db: SqlDatabase,
  tableId: TableId,
  now: Date,
): Promise<TableDropStart> {
  return await db.transaction(async (tx) => {
    const r = new SqlParams();
    const { rows: registered } = await tx.query(
      `SELECT table_id FROM ${TABLES_TABLE} WHERE table_id = ${r.text(tableId)} FOR UPDATE`,
      r.values,
    );
    if (registered.length === 0) {
      const m = new SqlParams();
      const { rows } = await tx.query(
        `SELECT 1 AS present FROM ${METADATA_TABLE} WHERE table_id = ${m.text(tableId)} LIMIT 1`,
        m.values,
      );
      return rows.length > 0 ? ({ kind: "resumed" } as const) : ({ kind: "unknown" } as const);
    }
    const p = new SqlParams();
    const live = SOME_LIVE_LEASE(p.time(now));
    const { rows: inFlight } = await tx.query<InFlightRow>(
      `SELECT table_id, partition_key, bucket_key, state, phase, hot_deleted,
              (restore_started_at IS NOT NULL) AS restoring,
              CASE WHEN ${live} THEN lease_expires_at END AS live_lease_expires_at
         FROM ${METADATA_TABLE}
        WHERE table_id = ${p.text(tableId)}
          AND (state = 'archiving' OR (state = 'archived' AND hot_deleted = false)
               OR restore_started_at IS NOT NULL OR ${live})
        ORDER BY partition_key, bucket_key
        LIMIT ${p.int(IN_FLIGHT_SHOWN)}`,
      p.values,
    );
    if (inFlight.length > 0) {
      return {
        kind: "in-flight",
        buckets: inFlight.map((row) => ({
          id: bucketIdOf(row),
          state: row.state as BucketState,
          phase: row.phase as RecordedPhase,
          hotDeleted: row.hot_deleted,
          restoring: row.restoring,
          leaseExpiresAt: sqlDateOrNull(row.live_lease_expires_at),
        })),
      } as const;
    }
    const u = new SqlParams();
    await tx.query(
      `UPDATE ${TABLES_TABLE}
          SET paused = true, drop_started_at = COALESCE(drop_started_at, ${u.time(now)}),
              updated_at = ${u.time(now)}
        WHERE table_id = ${u.text(tableId)}`,
      u.values,
    );
    return { kind: "paused" } as const;
  }, "beginTableDrop");
}

/**
 * Under the bucket's live lease: delete up to `limit` hot rows after
 * `after`; when none are left, delete the metadata row instead.
 */
export async function dropBucketBatch(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  limit: number,
  after: ClusteringPosition | null,
): Promise<DropBatch> {
  const id = lease.bucket;
  const result = await db.transaction(async (tx) => {
    // The fence first, so a stale holder deletes nothing.
    if (!(await lockUnderFence(tx, id, (f) => LIVE_LEASE(f, lease, now)))) return null;
    const deleted = await deleteNextKeyRange(tx, id, limit, after);
    if (deleted.last !== undefined)
      return { rows: deleted.count, bucketRemoved: false, last: deleted.last };
    // The batch reached the end: nothing is left after `after`, and rows before it were deleted earlier.
    const m = new SqlParams();
    const remaining = await tx.query(
      `SELECT 1 AS present FROM ${RECORDS_TABLE} WHERE ${BUCKET(m, id)} LIMIT 1`,
      m.values,
    );
    if (remaining.rows.length > 0) return { rows: deleted.count, bucketRemoved: false };
    await deleteParts(tx, id);
    const x = new SqlParams();
    await tx.query(`DELETE FROM ${METADATA_TABLE} WHERE ${BUCKET(x, id)}`, x.values);
    return { rows: deleted.count, bucketRemoved: true };
  }, "dropBucketBatch");
  if (result === null) {
    const m = new SqlParams();
    const { rows } = await db.query(
      `SELECT 1 AS present FROM ${METADATA_TABLE} WHERE ${BUCKET(m, id)}`,
      m.values,
    );
    // A missing row: an earlier batch whose reply was lost already removed it.
    return rows.length === 0
      ? { kind: "deleted", rows: 0, bucketRemoved: true }
      : { kind: "lease-lost", metadata: null };
  }
  return { kind: "deleted", ...result };
}

/** Delete the registration of `tableId` if none of its buckets remain. */
export async function finishTableDrop(db: SqlDatabase, tableId: TableId): Promise<TableDropFinish> {
  return await db.transaction(async (tx) => {
    const r = new SqlParams();
    const { rows: registered } = await tx.query(
      `SELECT table_id FROM ${TABLES_TABLE} WHERE table_id = ${r.text(tableId)} FOR UPDATE`,
      r.values,
    );
    const m = new SqlParams();
    const { rows: remaining } = await tx.query(
      `SELECT 1 AS present FROM ${METADATA_TABLE} WHERE table_id = ${m.text(tableId)} LIMIT 1`,
      m.values,
    );
    if (remaining.length > 0) return "buckets-remain" as const;
    if (registered.length === 0) return "dropped" as const;
    const d = new SqlParams();
    await tx.query(`DELETE FROM ${TABLES_TABLE} WHERE table_id = ${d.text(tableId)}`, d.values);
    const h = new SqlParams();
    await tx.query(
      `DELETE FROM ${POLICY_HISTORY_TABLE} WHERE table_id = ${h.text(tableId)}`,
      h.values,
    );
    return "dropped" as const;
  }, "finishTableDrop");
}
