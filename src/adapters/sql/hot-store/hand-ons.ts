/**
 * Hand-on tracking (ports/hand-on-tracking.ts): the worker's report that the
 * messages its commits promised were sent, and the bucket that has waited
 * longest between two phases with nobody on it (the stall alarm's metric).
 */
import type { HandOnSent, StalledBucket } from "../../../ports/hand-on-tracking.js";
import type { PhaseName } from "../../../ports/hot-store.js";
import type { SqlDatabase, SqlExecutor } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import {
  AUTOMATIC_WORK,
  BUCKET,
  NO_LIVE_LEASE,
  NO_PENDING_RETRY,
  NOT_RESTORING,
} from "./fences.js";
import { SqlParams } from "./params.js";
import { bucketIdOf, sqlDate, type BucketKeyRow } from "./rows.js";

export async function reportHandOnsSent(
  db: SqlDatabase,
  sent: readonly HandOnSent[],
): Promise<number> {
  if (sent.length === 0) return 0;
  const p = new SqlParams();
  // Only the promise of that commit: a later lease or commit has its own generation.
  const buckets = sent
    .map((s) => `(${BUCKET(p, s.bucket)} AND generation = ${p.int(s.generation)})`)
    .join(" OR ");
  const { rowCount } = await db.write(
    `UPDATE ${METADATA_TABLE} SET hand_on_unsent_since = NULL
      WHERE hand_on_unsent_since IS NOT NULL AND (${buckets})`,
    p.values,
    "reportHandOnsSent",
  );
  return rowCount;
}

/** Between two phases: fenced, or archived with a cleanup or an expiry still to run. */
const BETWEEN_PHASES =
  `((m.state = 'archiving' AND m.hot_deleted = false)` +
  ` OR (m.state = 'archived' AND m.hot_deleted = false AND ${NOT_RESTORING("m")} AND m.corrupt_at IS NULL)` +
  ` OR (m.state = 'archived' AND m.hot_deleted = true AND m.expiry_started_at IS NOT NULL))`;

export async function oldestStalled(db: SqlExecutor, now: Date): Promise<StalledBucket | null> {
  const p = new SqlParams();
  const nowParam = p.time(now);
  const { rows } = await db.query<
    BucketKeyRow & { state: string; phase: string; hot_deleted: boolean; since: string }
  >(
    `SELECT m.table_id, m.partition_key, m.bucket_key, m.state, m.phase, m.hot_deleted,
            GREATEST(m.updated_at, COALESCE(m.enqueued_at, m.updated_at)) AS since
       FROM ${METADATA_TABLE} m
      WHERE ${BETWEEN_PHASES} AND ${NO_LIVE_LEASE(nowParam, "m")} AND ${NO_PENDING_RETRY(nowParam, "m")}
        AND ${AUTOMATIC_WORK("m")}
      ORDER BY since, m.table_id, m.partition_key, m.bucket_key
      LIMIT 1`,
    p.values,
  );
  const row = rows[0];
  if (row === undefined) return null;
  const phase: PhaseName =
    row.state === "archiving" ? (row.phase as PhaseName) : row.hot_deleted ? "expire" : "cleanup";
  return {
    id: bucketIdOf(row),
    state: row.state === "archiving" ? "archiving" : "archived",
    phase,
    since: sqlDate(row.since),
  };
}
