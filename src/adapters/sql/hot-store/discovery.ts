/**
 * Discovery: the candidates for the next archival step, selected and
 * stamped `enqueued_at` in one statement.
 */
import type { Candidate, CandidateKind, DiscoveryQuery } from "../../../ports/hot-store.js";
import type { SqlDatabase, SqlExecutor } from "../database.js";
import { METADATA_TABLE } from "../migrations.js";
import {
  AUTOMATIC_WORK,
  NO_LIVE_LEASE,
  NO_PENDING_RETRY,
  NOT_RECENTLY_ENQUEUED,
  NOT_RESTORING,
  RESTORING,
  UNSENT_HAND_ON_DUE,
} from "./fences.js";
import { SqlParams } from "./params.js";
import { afterInTable, tableCutoffs } from "./windows.js";
import { toCandidate, type CandidateRow } from "./rows.js";

/** A candidate row with its turn: its rank within its kind, in the statement's key order. */
type RankedRow = CandidateRow & { turn: string | number };

export async function discover(db: SqlDatabase, query: DiscoveryQuery): Promise<Candidate[]> {
  // One statement: select the candidates and stamp them as enqueued.
  const { sql, params } = discoverySql(query, true);
  const { rows } = await db.write<RankedRow>(sql, params, "discover");
  return inDiscoveryOrder(rows);
}

export async function peekCandidates(db: SqlExecutor, query: DiscoveryQuery): Promise<Candidate[]> {
  const { sql, params } = discoverySql(query, false);
  const { rows } = await db.query<RankedRow>(sql, params);
  return inDiscoveryOrder(rows);
}

/** The plan PostgreSQL chooses for discovery, for operators and the index test. */
export async function explainDiscovery(db: SqlExecutor, query: DiscoveryQuery): Promise<string> {
  const { sql, params } = discoverySql(query, false);
  const { rows } = await db.query<Record<string, string>>(`EXPLAIN ${sql}`, params);
  return rows.map((r) => Object.values(r).join(" ")).join("\n");
}

/**
 * Discovery as one statement. Each kind is an index range scan in keyset
 * order, starting after its kind's keyset cursor and limited:
 *
 * - eligible: per table (a LATERAL scan of the table-window index
 *   `(state, hot_deleted, table_id, bucket_end, …)` for each active table),
 *   hot buckets up to the table's own cutoff (windows.ts), so a table that
 *   keeps two years hot costs the scan nothing beside one that keeps 90 days;
 * - stalled, cleanup: one scan of the keyset index `(state, hot_deleted,
 *   bucket_end, table_id, …)` each, as before policies existed;
 * - expire: per table as eligible, archived buckets whose hot rows are gone
 *   up to the table's expiry cutoff (null: none); and, on the keyset index,
 *   archived buckets whose expiry began and stopped between its two steps.
 * - restore: archived buckets marked as being restored that nobody holds
 *   (a restore cut off after its mark), on the index of marked rows, for a
 *   worker to finish; not a corrupt one (the finish would refuse it).
 *
 * Then the kinds take turns (`ROW_NUMBER` per kind) until the limit, so a
 * backlog of one kind cannot starve the others. With `stamp`, the same
 * statement sets `enqueued_at = now` on the candidates it returns.
 */
function discoverySql(query: DiscoveryQuery, stamp: boolean): { sql: string; params: unknown[] } {
  const p = new SqlParams();
  const now = p.time(query.now);
  const enqueuedBefore = p.time(query.enqueuedBefore);
  // Not in the queue: enqueued long enough ago, or handed on by a committer that never sent it.
  const notQueued =
    query.handOnBefore === undefined
      ? NOT_RECENTLY_ENQUEUED(enqueuedBefore, "m")
      : `(${NOT_RECENTLY_ENQUEUED(enqueuedBefore, "m")} OR ${UNSENT_HAND_ON_DUE(p.time(query.handOnBefore), "m")})`;
  const limit = p.int(query.limit);
  const tc = tableCutoffs(p, query, true);
  const columns = (kind: CandidateKind) =>
    `'${kind}' AS kind, m.table_id, m.partition_key, m.bucket_key, m.state, m.phase, m.bucket_end, m.enqueued_at`;
  const keyOrder = "m.bucket_end, m.table_id, m.partition_key, m.bucket_key";
  const after = (kind: CandidateKind): string => {
    const position = query.after?.[kind];
    if (position === undefined) return "";
    // A row comparison on the index's trailing columns: PostgreSQL and CockroachDB seek to it.
    return ` AND (${keyOrder}) > (${p.time(position.end)}, ${p.text(position.id.tableId)}, ${p.bytes(position.id.partitionKey)}, ${p.text(position.id.bucketKey)})`;
  };
  const waiting = `${NO_PENDING_RETRY(now, "m")} AND ${NO_LIVE_LEASE(now, "m")}
                AND ${notQueued} AND m.quarantined_at IS NULL`;
  /** One kind's buckets of every active table, each table's scan limited, in key order. */
  const perTable = (kind: CandidateKind, where: string) => `
            (SELECT c.* FROM ${tc} tc CROSS JOIN LATERAL (
               SELECT ${columns(kind)}
                 FROM ${METADATA_TABLE} m
                WHERE m.table_id = tc.table_id AND ${where} AND ${waiting}${afterInTable(p, query.after?.[kind], "tc.table_id", "m")}
                ORDER BY m.bucket_end, m.partition_key, m.bucket_key LIMIT ${limit}) c
              ORDER BY c.bucket_end, c.table_id, c.partition_key, c.bucket_key LIMIT ${limit})`;
  const candidates = `
    SELECT c.kind, c.table_id, c.partition_key, c.bucket_key, c.state, c.phase, c.bucket_end, c.enqueued_at,
           c.turn
      FROM (
        SELECT u.*, ROW_NUMBER() OVER (
                 PARTITION BY u.kind ORDER BY u.bucket_end, u.table_id, u.partition_key, u.bucket_key
               ) AS turn
          FROM (
            ${perTable("eligible", "m.state = 'hot' AND m.hot_deleted = false AND m.bucket_end <= tc.archive_cutoff")}
            UNION ALL
            (SELECT ${columns("stalled")}
               FROM ${METADATA_TABLE} m
              WHERE m.state = 'archiving' AND m.hot_deleted = false
                AND ${NO_LIVE_LEASE(now, "m")} AND ${NO_PENDING_RETRY(now, "m")}
                AND ${notQueued} AND ${AUTOMATIC_WORK("m")}${after("stalled")}
              ORDER BY ${keyOrder} LIMIT ${limit})
            UNION ALL
            (SELECT ${columns("cleanup")}
               FROM ${METADATA_TABLE} m
              WHERE m.state = 'archived' AND m.hot_deleted = false AND ${NOT_RESTORING("m")}
                AND m.corrupt_at IS NULL
                AND ${NO_LIVE_LEASE(now, "m")} AND ${NO_PENDING_RETRY(now, "m")}
                AND ${notQueued} AND ${AUTOMATIC_WORK("m")}${after("cleanup")}
              ORDER BY ${keyOrder} LIMIT ${limit})
            UNION ALL
            ${perTable(
              "expire",
              `m.state = 'archived' AND m.hot_deleted = true AND m.bucket_end <= tc.expire_cutoff
                AND ${NOT_RESTORING("m")} AND m.expiry_started_at IS NULL`,
            )}
            UNION ALL
            (SELECT ${columns("expire")}
               FROM ${METADATA_TABLE} m
              WHERE m.state = 'archived' AND m.hot_deleted = true AND m.expiry_started_at IS NOT NULL
                AND ${NO_LIVE_LEASE(now, "m")} AND ${NO_PENDING_RETRY(now, "m")}
                AND ${notQueued} AND ${AUTOMATIC_WORK("m")}${after("expire")}
              ORDER BY ${keyOrder} LIMIT ${limit})
            UNION ALL
            (SELECT ${columns("restore")}
               FROM ${METADATA_TABLE} m
              WHERE ${RESTORING("m")} AND m.state = 'archived' AND m.corrupt_at IS NULL
                AND ${NO_LIVE_LEASE(now, "m")} AND ${NO_PENDING_RETRY(now, "m")}
                AND ${notQueued} AND ${AUTOMATIC_WORK("m")}${after("restore")}
              ORDER BY ${keyOrder} LIMIT ${limit})
          ) u
      ) c
     ORDER BY c.turn, c.bucket_end, c.table_id, c.partition_key, c.bucket_key
     LIMIT ${limit}`;
  if (!stamp) return { sql: candidates, params: p.values };
  // Never a stamp later than the database's clock: a process whose clock ran ahead
  // would otherwise hide what it offered from every other scan until its own time.
  // The stamp re-checks its row: a concurrent run (or a worker's commit or
  // lease) that changed it after this statement's snapshot was taken makes
  // READ COMMITTED re-evaluate these conditions on the new row, which then
  // no longer matches, so two overlapping runs never both enqueue a bucket.
  const sql = `
    WITH c AS (${candidates})
    UPDATE ${METADATA_TABLE} AS m
       SET enqueued_at = CASE WHEN ${now} <= now() THEN ${now} ELSE now() END,
           hand_on_unsent_since = NULL
      FROM c
     WHERE m.table_id = c.table_id AND m.partition_key = c.partition_key
       AND m.bucket_key = c.bucket_key
       AND m.enqueued_at IS NOT DISTINCT FROM c.enqueued_at AND ${NO_LIVE_LEASE(now, "m")}
    RETURNING c.kind, c.table_id, c.partition_key, c.bucket_key, c.state, c.phase, c.bucket_end,
              m.enqueued_at, c.turn`;
  return { sql, params: p.values };
}

/**
 * The discovery order: oldest `bucket_end` first, then by turn (RETURNING has
 * no order). Within a kind the turn follows the statement's key order (the
 * database's collation, which JavaScript cannot reproduce), so the last
 * candidate of a kind is where that kind's keyset cursor continues.
 */
function inDiscoveryOrder(rows: readonly RankedRow[]): Candidate[] {
  const ranked = rows.map((row) => ({ candidate: toCandidate(row), turn: Number(row.turn) }));
  ranked.sort(
    (a, b) =>
      a.candidate.end.getTime() - b.candidate.end.getTime() ||
      a.turn - b.turn ||
      (a.candidate.kind < b.candidate.kind ? -1 : a.candidate.kind > b.candidate.kind ? 1 : 0),
  );
  return ranked.map((r) => r.candidate);
}
