/**
 * What keeps expiry back, for `pulpitum status`: buckets an Object Lock
 * holds (and since when, which the alarm watches), and buckets past their
 * table's expiry cutoff that expiry may not touch because they are not
 * archived with their hot rows gone, are quarantined, being restored, or
 * in a paused table. Those are never deleted without an archive: they are
 * reported as overdue.
 */
import type { ExpiryBlocked } from "../../../ports/bucket-expiry.js";
import type { BucketState, Cutoffs, StatusReport } from "../../../ports/hot-store.js";
import type { SqlExecutor } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import { SqlParams } from "./params.js";
import { bucketIdOf, sqlDate, sqlDateOrNull, type BucketKeyRow } from "./rows.js";
import { tableCutoffs } from "./windows.js";

/** At most this many overdue buckets are listed (all are counted). */
const OVERDUE_LISTED = 100;

interface OverdueRow extends BucketKeyRow {
  state: string;
  hot_deleted: boolean;
  bucket_end: string;
  quarantined: boolean;
  restoring: boolean;
  paused: boolean;
}

export async function expiryStatus(
  db: SqlExecutor,
  cutoffs: Cutoffs,
): Promise<StatusReport["expiry"]> {
  const blocked = await expiryBlocked(db);
  const overdue = (p: SqlParams) => `
      FROM ${METADATA_TABLE} m JOIN ${tableCutoffs(p, cutoffs, false)} tc
        ON tc.table_id = m.table_id
     WHERE m.bucket_end <= tc.expire_cutoff AND m.state <> 'expired'
       AND (m.state <> 'archived' OR m.hot_deleted = false OR m.quarantined_at IS NOT NULL
            OR m.restore_started_at IS NOT NULL OR tc.paused)`;
  const c = new SqlParams();
  const { rows: counted } = await db.query<{ n: string | number }>(
    `SELECT count(*) AS n ${overdue(c)}`,
    c.values,
  );
  const p = new SqlParams();
  const { rows } = await db.query<OverdueRow>(
    `SELECT m.table_id, m.partition_key, m.bucket_key, m.state, m.hot_deleted, m.bucket_end,
            (m.quarantined_at IS NOT NULL) AS quarantined,
            (m.restore_started_at IS NOT NULL) AS restoring, tc.paused
       ${overdue(p)}
      ORDER BY m.bucket_end, m.table_id, m.partition_key, m.bucket_key
      LIMIT ${p.int(OVERDUE_LISTED)}`,
    p.values,
  );
  return {
    held: blocked.held,
    oldestBlockedSince: blocked.oldestSince,
    overdueCount: Number(counted[0]?.n ?? 0),
    overdue: rows.map((r) => ({
      id: bucketIdOf(r),
      state: r.state as BucketState,
      end: sqlDate(r.bucket_end),
      reason: overdueReason(r),
    })),
  };
}

/** See BucketExpiry.expiryBlocked. */
export async function expiryBlocked(db: SqlExecutor): Promise<ExpiryBlocked> {
  const { rows } = await db.query<{ n: string | number; since: string | null }>(
    `SELECT count(*) AS n, min(expiry_blocked_since) AS since FROM ${METADATA_TABLE}
      WHERE state = 'archived' AND expiry_blocked_since IS NOT NULL`,
  );
  return { held: Number(rows[0]?.n ?? 0), oldestSince: sqlDateOrNull(rows[0]?.since ?? null) };
}

function overdueReason(r: OverdueRow): string {
  const why: string[] = [];
  if (r.paused) why.push("its table is paused");
  if (r.quarantined) why.push("it is quarantined");
  if (r.restoring) why.push("it is being restored");
  if (r.state === "hot" || r.state === "archiving") why.push(`it was never archived (${r.state})`);
  else if (r.state === "archived" && !r.hot_deleted) why.push("its hot rows are not deleted yet");
  return `past expire_after but not expired: ${why.join(", ")}; nothing is deleted before it is archived`;
}
