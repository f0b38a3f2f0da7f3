/**
 * Read-only operator views of bucket metadata: a table's archived buckets
 * with the objects their reads go to, and the buckets that ended before the
 * cutoff but are not offered for archival (with the facts that say why).
 */
import type { BucketStrategy } from "../../../domain/bucket.js";
import type { TableId } from "../../../domain/table.js";
import type { BucketState, Cutoffs, RecordedPhase } from "../../../ports/hot-store.js";
import type { ArchivedBucket, HeldBucket } from "../../../ports/hot-store-operations.js";
import type { SqlExecutor } from "../database.js";
import { METADATA_TABLE, TABLES_TABLE } from "../migrations.js";
import { SOME_LIVE_LEASE } from "./fences.js";
import { SqlParams } from "./params.js";
import { tableCutoffs } from "./windows.js";
import { bucketIdOf, sqlDate, sqlDateOrNull, type BucketKeyRow } from "./rows.js";

interface ArchivedRow extends BucketKeyRow {
  bucket_strategy: string;
  bucket_start: string;
  bucket_end: string;
  generation: string | number;
  payload_key: string | null;
  payload_sha256: string | null;
  payload_rows: string | number;
  payload_bytes: string | number;
  payload_parts: string | number | null;
  manifest_key: string;
  hot_deleted: boolean;
  restore_started_at: string | null;
  corrupt_at: string | null;
  corrupt_problem: string | null;
}

/**
 * One page of a table's archived buckets in primary-key order after `after`
 * (exclusive), optionally of one partition: a keyset scan of the metadata
 * primary key.
 */
export async function listArchivedBuckets(
  db: SqlExecutor,
  tableId: TableId,
  options: {
    readonly partitionKey?: Uint8Array;
    readonly after: { readonly partitionKey: Uint8Array; readonly bucketKey: string } | null;
    readonly limit: number;
  },
): Promise<ArchivedBucket[]> {
  const p = new SqlParams();
  const conditions = [
    `table_id = ${p.text(tableId)}`,
    `state = 'archived'`,
    `manifest_key IS NOT NULL`,
    `payload_rows IS NOT NULL`,
  ];
  if (options.partitionKey !== undefined)
    conditions.push(`partition_key = ${p.bytes(options.partitionKey)}`);
  if (options.after !== null) {
    conditions.push(
      `(partition_key, bucket_key) > (${p.bytes(options.after.partitionKey)}, ${p.text(options.after.bucketKey)})`,
    );
  }
  const { rows } = await db.query<ArchivedRow>(
    `SELECT table_id, partition_key, bucket_key, bucket_strategy, bucket_start, bucket_end,
            generation, payload_key, payload_sha256, payload_rows, payload_bytes, payload_parts,
            manifest_key,
            hot_deleted, restore_started_at, corrupt_at, corrupt_problem
       FROM ${METADATA_TABLE}
      WHERE ${conditions.join(" AND ")}
      ORDER BY partition_key, bucket_key
      LIMIT ${p.int(options.limit)}`,
    p.values,
  );
  return rows.map((r) => ({
    id: bucketIdOf(r),
    strategy: r.bucket_strategy as BucketStrategy,
    start: sqlDate(r.bucket_start),
    end: sqlDate(r.bucket_end),
    generation: Number(r.generation),
    payload:
      r.payload_key === null || r.payload_sha256 === null
        ? null
        : {
            key: r.payload_key,
            sha256: r.payload_sha256,
            rowCount: Number(r.payload_rows),
            byteLength: Number(r.payload_bytes),
          },
    parts: r.payload_parts === null ? 1 : Number(r.payload_parts),
    rowCount: Number(r.payload_rows),
    byteLength: Number(r.payload_bytes),
    manifestKey: r.manifest_key,
    hotDeleted: r.hot_deleted,
    restoreStartedAt: sqlDateOrNull(r.restore_started_at),
    corruption:
      r.corrupt_at === null
        ? null
        : { at: sqlDate(r.corrupt_at), problem: r.corrupt_problem ?? "" },
  }));
}

export interface HeldRow extends BucketKeyRow {
  state: string;
  phase: string;
  bucket_end: string;
  attempts: string | number;
  retry_at: string | null;
  last_error: string | null;
  live_lease_expires_at: string | null;
  restoring: boolean;
  quarantined: boolean;
  paused: boolean | null;
}

/** The columns of a {@link HeldRow} from metadata `m` and its table `t`, leases judged at `now`. */
export function heldColumns(now: string): string {
  const live = SOME_LIVE_LEASE(now, "m");
  return `m.table_id, m.partition_key, m.bucket_key, m.state, m.phase, m.bucket_end,
         m.attempts, m.retry_at, m.last_error,
         CASE WHEN ${live} THEN m.lease_expires_at END AS live_lease_expires_at,
         (m.restore_started_at IS NOT NULL) AS restoring,
         (m.quarantined_at IS NOT NULL) AS quarantined, t.paused`;
}

export function toHeldBucket(r: HeldRow): HeldBucket {
  return {
    id: bucketIdOf(r),
    state: r.state as BucketState,
    phase: r.phase as RecordedPhase,
    end: sqlDate(r.bucket_end),
    tablePaused: r.paused === true,
    attempts: Number(r.attempts),
    retryAt: sqlDateOrNull(r.retry_at),
    lastError: r.last_error,
    leaseExpiresAt: sqlDateOrNull(r.live_lease_expires_at),
    restoring: r.restoring,
    quarantined: r.quarantined,
  };
}

/**
 * Buckets that ended at or before their table's cutoff (windows.ts) and are
 * still hot but are not offered for archival (their table is paused, a
 * retry or a restore's hold is pending, or a lease is live), and buckets in
 * flight (archiving, archived with cleanup pending under a live lease or
 * being restored). Oldest `bucket_end` first, at most `limit`.
 */
export async function listHeldBuckets(
  db: SqlExecutor,
  query: Cutoffs & { readonly now: Date; readonly limit: number },
): Promise<HeldBucket[]> {
  const p = new SqlParams();
  const now = p.time(query.now);
  const limit = p.int(query.limit);
  const live = SOME_LIVE_LEASE(now, "m");
  const tc = tableCutoffs(p, query, false);
  const columns = heldColumns(now);
  const { rows } = await db.query<HeldRow>(
    `SELECT h.* FROM (
       (SELECT ${columns}
          FROM ${METADATA_TABLE} m JOIN ${TABLES_TABLE} t ON t.table_id = m.table_id
          JOIN ${tc} tc ON tc.table_id = m.table_id
         WHERE m.state = 'hot' AND m.hot_deleted = false AND m.bucket_end <= tc.archive_cutoff
           AND (t.paused = true OR m.retry_at > ${now} OR ${live})
         ORDER BY m.bucket_end LIMIT ${limit})
       UNION ALL
       (SELECT ${columns}
          FROM ${METADATA_TABLE} m LEFT JOIN ${TABLES_TABLE} t ON t.table_id = m.table_id
         WHERE m.state = 'archiving' AND m.hot_deleted = false AND ${live}
         ORDER BY m.bucket_end LIMIT ${limit})
       UNION ALL
       (SELECT ${columns}
          FROM ${METADATA_TABLE} m LEFT JOIN ${TABLES_TABLE} t ON t.table_id = m.table_id
         WHERE m.state = 'archived' AND m.hot_deleted = false
           AND (${live} OR m.restore_started_at IS NOT NULL)
         ORDER BY m.bucket_end LIMIT ${limit})
     ) h
     ORDER BY h.bucket_end, h.table_id, h.partition_key, h.bucket_key
     LIMIT ${limit}`,
    p.values,
  );
  return rows.map(toHeldBucket);
}
