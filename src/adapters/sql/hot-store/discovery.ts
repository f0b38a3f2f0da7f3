/**
 * Discovery: the candidates for the next archival step, selected and
 * stamped `enqueued_at` in one statement.
 */
import { bufferView } from "../../../domain/record.js";
import type { Candidate, CandidateKind, DiscoveryQuery } from "../../../ports/hot-store.js";
import type { SqlDatabase, SqlExecutor } from "../database.js";
import { METADATA_TABLE, TABLES_TABLE } from "../migrations.js";
import {
  AUTOMATIC_WORK,
  NO_LIVE_LEASE,
  NO_PENDING_RETRY,
  NOT_RECENTLY_ENQUEUED,
  NOT_RESTORING,
} from "./fences.js";
import { SqlParams } from "./params.js";
import { toCandidate, type CandidateRow } from "./rows.js";

export async function discover(db: SqlDatabase, query: DiscoveryQuery): Promise<Candidate[]> {
  // One statement: select the candidates and stamp them as enqueued.
  const { sql, params } = discoverySql(query, true);
  const { rows } = await db.write<CandidateRow>(sql, params, "discover");
  return sortCandidates(rows.map(toCandidate));
}

export async function peekCandidates(db: SqlExecutor, query: DiscoveryQuery): Promise<Candidate[]> {
  const { sql, params } = discoverySql(query, false);
  const { rows } = await db.query<CandidateRow>(sql, params);
  return rows.map(toCandidate);
}

/** The plan PostgreSQL chooses for discovery, for operators and the index test. */
export async function explainDiscovery(db: SqlExecutor, query: DiscoveryQuery): Promise<string> {
  const { sql, params } = discoverySql(query, false);
  const { rows } = await db.query<Record<string, string>>(`EXPLAIN ${sql}`, params);
  return rows.map((r) => Object.values(r).join(" ")).join("\n");
}

/**
 * Discovery as one statement: three index range scans over
 * `(state, hot_deleted, bucket_end)`, each already in `bucket_end` order and
 * limited, merged and limited again. With `stamp`, the same statement sets
 * `enqueued_at = now` on the candidates it returns.
 */
function discoverySql(query: DiscoveryQuery, stamp: boolean): { sql: string; params: unknown[] } {
  const p = new SqlParams();
  const now = p.time(query.now);
  const cutoff = p.time(query.cutoff);
  const enqueuedBefore = p.time(query.enqueuedBefore);
  const limit = p.int(query.limit);
  const columns = (kind: CandidateKind) =>
    `'${kind}' AS kind, m.table_id, m.partition_key, m.bucket_key, m.state, m.phase, m.bucket_end, m.enqueued_at`;
  const candidates = `
    SELECT c.kind, c.table_id, c.partition_key, c.bucket_key, c.state, c.phase, c.bucket_end, c.enqueued_at
      FROM (
        (SELECT ${columns("eligible")}
           FROM ${METADATA_TABLE} m JOIN ${TABLES_TABLE} t ON t.table_id = m.table_id
          WHERE m.state = 'hot' AND m.hot_deleted = false AND m.bucket_end <= ${cutoff}
            AND ${NO_PENDING_RETRY(now, "m")} AND ${NO_LIVE_LEASE(now, "m")} AND t.paused = false
            AND ${NOT_RECENTLY_ENQUEUED(enqueuedBefore, "m")} AND ${AUTOMATIC_WORK("m")}
          ORDER BY m.bucket_end LIMIT ${limit})
        UNION ALL
        (SELECT ${columns("stalled")}
           FROM ${METADATA_TABLE} m
          WHERE m.state = 'archiving' AND m.hot_deleted = false
            AND ${NO_LIVE_LEASE(now, "m")} AND ${NO_PENDING_RETRY(now, "m")}
            AND ${NOT_RECENTLY_ENQUEUED(enqueuedBefore, "m")} AND ${AUTOMATIC_WORK("m")}
          ORDER BY m.bucket_end LIMIT ${limit})
        UNION ALL
        (SELECT ${columns("cleanup")}
           FROM ${METADATA_TABLE} m
          WHERE m.state = 'archived' AND m.hot_deleted = false AND ${NOT_RESTORING("m")}
            AND ${NO_LIVE_LEASE(now, "m")}
            AND ${NOT_RECENTLY_ENQUEUED(enqueuedBefore, "m")} AND ${AUTOMATIC_WORK("m")}
          ORDER BY m.bucket_end LIMIT ${limit})
      ) c
     ORDER BY c.bucket_end, c.table_id, c.partition_key, c.bucket_key
     LIMIT ${limit}`;
  if (!stamp) return { sql: candidates, params: p.values };
  const sql = `
    WITH c AS (${candidates})
    UPDATE ${METADATA_TABLE} AS m SET enqueued_at = ${now}
      FROM c
     WHERE m.table_id = c.table_id AND m.partition_key = c.partition_key
       AND m.bucket_key = c.bucket_key
    RETURNING c.kind, c.table_id, c.partition_key, c.bucket_key, c.state, c.phase, c.bucket_end,
              m.enqueued_at`;
  return { sql, params: p.values };
}

/** The discovery order: oldest `bucket_end` first, then by key (RETURNING has no order). */
function sortCandidates(candidates: Candidate[]): Candidate[] {
  const key = (c: Candidate) =>
    `${c.id.tableId}\u0000${bufferView(c.id.partitionKey).toString("hex")}\u0000${c.id.bucketKey}`;
  return candidates.sort((a, b) => {
    const byEnd = a.end.getTime() - b.end.getTime();
    if (byEnd !== 0) return byEnd;
    const ka = key(a);
    const kb = key(b);
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });
}
