/**
 * Removing a table from the hot store.
 *
 * The registration goes first, in one SERIALIZABLE transaction that also
 * checks that no bucket is in flight: from its commit on, appends fail
 * (they read the registration in their own transaction) and discovery no
 * longer offers the table's hot buckets (it joins the registry). A lease a
 * worker takes concurrently conflicts with that check, so one of the two
 * transactions is retried and sees the other.
 *
 * Each bucket is then removed under its own lease, like cleanup: hot rows in
 * bounded key-range batches, each conditioned on the live lease, and the
 * metadata row last, in the batch that finds no rows left. A worker holding
 * an old queue message cannot act on a bucket meanwhile (every phase needs
 * the lease), and an interrupted drop leaves whole buckets or leased ones
 * whose leases expire, so running it again finishes it.
 */
import type { TableId } from "../../domain/table.js";
import { parseSqlTimestamp, formatMicrosRfc3339 } from "../../domain/time.js";
import type { BucketState, Lease, RecordedPhase } from "../../ports/hot-store.js";
import type { DropBatch, TableDropStart } from "../../ports/hot-store-operations.js";
import type { SqlDatabase } from "./database.js";
import { METADATA_TABLE, RECORDS_TABLE, TABLES_TABLE } from "./migrations.js";
import {
  bucketIdOf,
  someLiveLease,
  sqlDateOrNull,
  SqlParams,
  type BucketKeyRow,
} from "./sql-params.js";

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
 * Unregister `tableId` unless a bucket of it is in flight: archiving, archived
 * with cleanup pending, being restored, or under a live lease.
 */
export async function beginTableDrop(
  db: SqlDatabase,
  tableId: TableId,
  now: Date,
): Promise<TableDropStart> {
  return await db.transaction(async (tx) => {
    const p = new SqlParams();
    const nowParam = p.time(now);
    const live = someLiveLease(nowParam);
    const { rows: inFlight } = await tx.query<InFlightRow>(
      `SELECT table_id, partition_key, bucket_key, state, phase, hot_deleted,
              (restore_started_at IS NOT NULL) AS restoring,
              CASE WHEN ${live} THEN lease_expires_at END AS live_lease_expires_at
         FROM ${METADATA_TABLE}
        WHERE table_id = ${p.add(tableId)}
          AND (state = 'archiving' OR (state = 'archived' AND hot_deleted = false)
               OR restore_started_at IS NOT NULL OR ${live})
        ORDER BY partition_key, bucket_key
        LIMIT ${p.add(IN_FLIGHT_SHOWN)}`,
      p.values,
    );
    if (inFlight.length > 0) {
      return {
        kind: "in-flight",
        buckets: inFlight.map((r) => ({
          id: bucketIdOf(r),
          state: r.state as BucketState,
          phase: r.phase as RecordedPhase,
          hotDeleted: r.hot_deleted,
          restoring: r.restoring,
          leaseExpiresAt: sqlDateOrNull(r.live_lease_expires_at),
        })),
      } as const;
    }
    const { rowCount } = await tx.query(`DELETE FROM ${TABLES_TABLE} WHERE table_id = $1`, [
      tableId,
    ]);
    if (rowCount > 0) return { kind: "unregistered" } as const;
    const { rows } = await tx.query(
      `SELECT 1 AS present FROM ${METADATA_TABLE} WHERE table_id = $1 LIMIT 1`,
      [tableId],
    );
    return rows.length > 0 ? ({ kind: "resumed" } as const) : ({ kind: "unknown" } as const);
  }, "beginTableDrop");
}

/**
 * Delete up to `limit` hot rows of the leased bucket; when none are left,
 * delete its metadata row instead. Both are conditioned on the live lease.
 */
export async function dropBucketBatch(
  db: SqlDatabase,
  lease: Lease,
  now: Date,
  limit: number,
): Promise<DropBatch> {
  const id = lease.bucket;
  const result = await db.transaction(async (tx) => {
    const b = new SqlParams();
    // The last key of this batch first, then a key range: index range scans
    // whatever the statistics say (as cleanup does).
    const { rows: last } = await tx.query<{ event_time: string; sort_key: Uint8Array }>(
      `SELECT event_time, sort_key FROM ${RECORDS_TABLE} WHERE ${b.bucket(id)}
        ORDER BY event_time, sort_key OFFSET ${b.add(Math.max(0, limit - 1))} LIMIT 1`,
      b.values,
    );
    const p = new SqlParams();
    const upTo =
      last[0] === undefined
        ? ""
        : `AND (event_time, sort_key) <= (${p.add(formatMicrosRfc3339(parseSqlTimestamp(last[0].event_time)))}::TIMESTAMPTZ, ${p.bytes(last[0].sort_key)})`;
    const deleted = await tx.query(
      `DELETE FROM ${RECORDS_TABLE}
        WHERE ${p.bucket(id)} ${upTo}
          AND EXISTS (SELECT 1 FROM ${METADATA_TABLE} WHERE ${p.bucket(id)} AND ${p.liveLease(lease, now)})`,
      p.values,
    );
    if (deleted.rowCount > 0) return { rows: deleted.rowCount, bucketRemoved: false };
    const m = new SqlParams();
    const removed = await tx.query(
      `DELETE FROM ${METADATA_TABLE}
        WHERE ${m.bucket(id)} AND ${m.liveLease(lease, now)}
          AND NOT EXISTS (SELECT 1 FROM ${RECORDS_TABLE} WHERE ${m.bucket(id)})`,
      m.values,
    );
    return removed.rowCount > 0 ? { rows: 0, bucketRemoved: true } : null;
  }, "dropBucketBatch");
  if (result !== null) return { kind: "deleted", ...result };
  const m = new SqlParams();
  const { rows } = await db.query(
    `SELECT 1 AS present FROM ${METADATA_TABLE} WHERE ${m.bucket(id)}`,
    m.values,
  );
  // A missing row means an earlier, lost reply already removed it under this lease.
  return rows.length === 0
    ? { kind: "deleted", rows: 0, bucketRemoved: true }
    : { kind: "lease-lost", metadata: null };
}
