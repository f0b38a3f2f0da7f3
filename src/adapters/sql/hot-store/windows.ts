/**
 * Each table's cutoffs inside one statement: the relation `tc (table_id,
 * archive_cutoff, expire_cutoff)` that discovery, `plan` and `status` join
 * their buckets with (see Cutoffs in ports/hot-store-types.ts).
 *
 * A table listed in `windows` at its current policy version takes the
 * listed cutoffs. A table not listed so takes `cutoff` if it has no window
 * of its own (its rule is the global one), and no cutoff at all otherwise:
 * its policy changed after the caller computed the windows, and the next
 * scan will see the new one. So no statement ever acts on a cutoff computed
 * from a policy that is no longer the table's. Each cutoff is then the
 * earlier of the caller's and the one the database's clock gives the same
 * policy (database-cutoffs.ts), so no process clock makes a bucket eligible
 * or due before the database's does.
 */
import type { CandidatePosition, Cutoffs, TableWindow } from "../../../ports/hot-store.js";
import { TABLES_TABLE } from "../migrations.js";
import { databaseArchiveCutoff, databaseExpireCutoff, earlierOf } from "./database-cutoffs.js";
import type { SqlParams } from "./params.js";

/** `windows` as a relation `(table_id, policy_version, archive_cutoff, expire_cutoff)`. */
function windowRows(p: SqlParams, windows: readonly TableWindow[]): string {
  if (windows.length === 0) {
    return `(SELECT CAST(NULL AS TEXT) AS table_id, CAST(NULL AS INT8) AS policy_version,
                    CAST(NULL AS TIMESTAMPTZ) AS archive_cutoff,
                    CAST(NULL AS TIMESTAMPTZ) AS expire_cutoff
              WHERE false)`;
  }
  const rows = windows.map(
    (w) =>
      `(${p.text(w.tableId)}, ${p.int(w.policyVersion)}, ${p.time(w.archiveCutoff)}, ` +
      `${p.timeOrNull(w.expireCutoff ?? null)})`,
  );
  return `(VALUES ${rows.join(", ")})`;
}

/**
 * The relation `tc` of every table's cutoffs (see the module header); a
 * table's `expire_cutoff` is null unless it is listed at its current policy
 * version with one, so no bucket expires under a policy that changed;
 * `activeOnly` leaves out paused tables and tables being dropped, which no
 * automatic work touches.
 */
export function tableCutoffs(p: SqlParams, query: Cutoffs, activeOnly: boolean): string {
  const fallback = p.time(query.cutoff);
  const callers = `CASE WHEN w.table_id IS NOT NULL THEN w.archive_cutoff
                        WHEN t.archive_after IS NULL THEN ${fallback}
                   END`;
  return `(SELECT t.table_id, t.paused,
                  ${earlierOf(callers, databaseArchiveCutoff(p, "t", query.rule))} AS archive_cutoff,
                  ${earlierOf("w.expire_cutoff", databaseExpireCutoff("t"))} AS expire_cutoff
             FROM ${TABLES_TABLE} t
             LEFT JOIN ${windowRows(p, query.windows ?? [])}
                    AS w (table_id, policy_version, archive_cutoff, expire_cutoff)
               ON w.table_id = t.table_id AND w.policy_version = t.policy_version
            ${activeOnly ? "WHERE t.paused = false AND t.drop_started_at IS NULL" : ""})`;
}

/**
 * A keyset cursor `(bucket_end, table_id, partition_key, bucket_key) >
 * position` inside a scan of one table `tableColumn`, written as a row
 * comparison on `(bucket_end, partition_key, bucket_key)` alone, so the
 * per-table index range starts at it: for a table after the cursor's,
 * every bucket from `bucket_end` on; for one before it, every bucket after
 * `bucket_end` (timestamps have microsecond resolution); for the cursor's
 * own table, the buckets after its key. Bucket keys are never empty, so
 * an empty partition key and bucket key are below every row.
 */
export function afterInTable(
  p: SqlParams,
  position: CandidatePosition | undefined,
  tableColumn: string,
  alias: string,
): string {
  if (position === undefined) return "";
  const end = p.time(position.end);
  const table = p.text(position.id.tableId);
  const partition = p.bytes(position.id.partitionKey);
  const bucket = p.text(position.id.bucketKey);
  const empty = p.bytes(new Uint8Array(0));
  return (
    ` AND (${alias}.bucket_end, ${alias}.partition_key, ${alias}.bucket_key) > (` +
    `CASE WHEN ${tableColumn} < ${table} THEN ${end} + INTERVAL '1 microsecond' ELSE ${end} END, ` +
    `CASE WHEN ${tableColumn} = ${table} THEN ${partition} ELSE ${empty} END, ` +
    `CASE WHEN ${tableColumn} = ${table} THEN ${bucket} ELSE '' END)`
  );
}
