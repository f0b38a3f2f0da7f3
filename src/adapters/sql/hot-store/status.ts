/**
 * The status report: bucket counts and rows by table and state, deferred
 * and leased buckets, and the oldest eligible hot bucket.
 */
import type { BucketState, Cutoffs, StatusReport } from "../../../ports/hot-store.js";
import type { SqlExecutor } from "../database.js";
import { METADATA_TABLE, RECORDS_TABLE } from "../migrations.js";
import { SqlParams } from "./params.js";
import { NO_LIVE_LEASE, NO_PENDING_RETRY } from "./fences.js";
import { tableCutoffs } from "./windows.js";
import { expiryStatus } from "./expiry-status.js";
import { listTables } from "./registry.js";
import { METADATA_COLUMNS, toMetadata, type MetadataRow } from "./rows.js";

export async function statusReport(
  db: SqlExecutor,
  now: Date,
  cutoffs: Cutoffs,
): Promise<StatusReport> {
  const tables = (await listTables(db)).sort((a, b) => a.tableId.localeCompare(b.tableId));
  const { rows: stateRows } = await db.query<{
    table_id: string;
    state: string;
    hot_deleted: boolean;
    buckets: string | number;
    archived_rows: string | number | null;
    archived_bytes: string | number | null;
    expired_rows: string | number | null;
    released_objects: string | number | null;
    released_bytes: string | number | null;
  }>(
    `SELECT table_id, state, hot_deleted, count(*) AS buckets,
            sum(CASE WHEN state = 'archived' THEN payload_rows ELSE 0 END) AS archived_rows,
            sum(CASE WHEN state = 'archived' THEN payload_bytes ELSE 0 END) AS archived_bytes,
            sum(COALESCE(expired_rows, 0)) AS expired_rows,
            sum(COALESCE(released_objects, 0)) AS released_objects,
            sum(COALESCE(released_bytes, 0)) AS released_bytes
       FROM ${METADATA_TABLE} GROUP BY table_id, state, hot_deleted`,
  );
  const { rows: hotRows } = await db.query<{
    table_id: string;
    state: string;
    hot_deleted: boolean;
    n: string | number;
  }>(
    `SELECT m.table_id, m.state, m.hot_deleted, count(*) AS n
       FROM ${RECORDS_TABLE} r
       JOIN ${METADATA_TABLE} m
         ON m.table_id = r.table_id AND m.partition_key = r.partition_key AND m.bucket_key = r.bucket_key
      GROUP BY m.table_id, m.state, m.hot_deleted`,
  );
  const hotCount = (t: string, st: string, hd: boolean) =>
    Number(hotRows.find((r) => r.table_id === t && r.state === st && r.hot_deleted === hd)?.n ?? 0);
  const order = { hot: 0, archiving: 1, archived: 2, expired: 3 } as const;
  const p = new SqlParams();
  const nowParam = p.time(now);
  // NULLS LAST spelled out: CockroachDB sorts NULLs first by default, PostgreSQL last.
  // Deferred: sent back to hot after a failure, or a suspended export (it kept its parts);
  // a quarantined one is listed as quarantined only.
  const d = new SqlParams();
  const { rows: deferred } = await db.query<MetadataRow>(
    `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE}
      WHERE (state = 'hot' OR (state = 'archiving' AND phase = 'export' AND owner_token IS NULL
                               AND retry_at > ${d.time(now)}))
        AND (attempts > 0 OR outage_deferrals > 0) AND last_error IS NOT NULL
        AND quarantined_at IS NULL
      ORDER BY retry_at NULLS LAST, table_id, partition_key, bucket_key LIMIT 100`,
    d.values,
  );
  const { rows: quarantined } = await db.query<MetadataRow>(
    `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE}
      WHERE quarantined_at IS NOT NULL
      ORDER BY quarantined_at, table_id, partition_key, bucket_key LIMIT 100`,
  );
  const { rows: leased } = await db.query<MetadataRow>(
    `SELECT ${METADATA_COLUMNS} FROM ${METADATA_TABLE}
      WHERE owner_token IS NOT NULL AND lease_expires_at > ${nowParam}
      ORDER BY lease_expires_at LIMIT 100`,
    p.values,
  );
  return {
    tables: tables.map((t) => ({
      tableId: t.tableId,
      paused: t.paused,
      strategy: t.strategy,
      format: t.format,
      states: stateRows
        .filter((r) => r.table_id === t.tableId)
        .map((r) => ({
          state: r.state as BucketState,
          hotDeleted: r.hot_deleted,
          buckets: Number(r.buckets),
          hotRows: hotCount(r.table_id, r.state, r.hot_deleted),
          archivedRows: Number(r.archived_rows ?? 0),
          archivedBytes: Number(r.archived_bytes ?? 0),
          expiredRows: Number(r.expired_rows ?? 0),
          releasedObjects: Number(r.released_objects ?? 0),
          releasedBytes: Number(r.released_bytes ?? 0),
        }))
        .sort(
          (a, b) => order[a.state] - order[b.state] || Number(a.hotDeleted) - Number(b.hotDeleted),
        ),
    })),
    deferred: deferred.map(toMetadata).map((m) => ({
      id: m.id,
      attempts: m.attempts,
      outageDeferrals: m.outageDeferrals,
      retryAt: m.retryAt,
      lastError: m.lastError,
    })),
    quarantined: quarantined.map(toMetadata).map((m) => ({
      id: m.id,
      state: m.state,
      attempts: m.attempts,
      quarantinedAt: m.quarantinedAt!,
      retryAt: m.quarantineRetryAt,
      lastError: m.lastError,
    })),
    leased: leased
      .map(toMetadata)
      .map((m) => ({ id: m.id, phase: m.phase, leaseExpiresAt: m.leaseExpiresAt! })),
    expiry: await expiryStatus(db, cutoffs),
    oldestEligibleHot: await oldestEligibleHot(db, now, cutoffs),
  };
}

/** The oldest hot bucket past its table's cutoff that discovery would offer: how far behind archival is. */
async function oldestEligibleHot(
  db: SqlExecutor,
  now: Date,
  cutoffs: Cutoffs,
): Promise<StatusReport["oldestEligibleHot"]> {
  const q = new SqlParams();
  const qNow = q.time(now);
  const { rows: oldest } = await db.query<MetadataRow>(
    `SELECT ${METADATA_COLUMNS.split(", ")
      .map((c) => `m.${c}`)
      .join(", ")}
       FROM ${METADATA_TABLE} m JOIN ${tableCutoffs(q, cutoffs, true)} tc
         ON tc.table_id = m.table_id
      WHERE m.state = 'hot' AND m.hot_deleted = false AND m.bucket_end <= tc.archive_cutoff
        AND ${NO_PENDING_RETRY(qNow, "m")} AND m.quarantined_at IS NULL AND ${NO_LIVE_LEASE(qNow, "m")}
      ORDER BY m.bucket_end LIMIT 1`,
    q.values,
  );
  if (oldest[0] === undefined) return null;
  const m = toMetadata(oldest[0]);
  return { id: m.id, end: m.end };
}
