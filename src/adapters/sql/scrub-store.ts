/**
 * The scrub port (src/ports/scrub-store.ts) on the SQL hot store's
 * database: the `verified_at`, `corrupt_at` and `corrupt_problem` columns of
 * the bucket metadata and one row per archive root in
 * `pulpitum_v4_scrub_progress` (migration 11). Each mark is one statement
 * conditional on the version the scrub verified (state, generation and
 * manifest key), so it never lands on a newer archive of the bucket.
 */
import type { TableId } from "../../domain/table.js";
import type { HotStore } from "../../ports/hot-store.js";
import type {
  CorruptBucket,
  ScrubCandidate,
  ScrubCursor,
  ScrubRun,
  ScrubStore,
  VerifiedVersion,
} from "../../ports/scrub-store.js";
import type { SqlDatabase } from "./database.js";
import { BUCKET } from "./hot-store/fences.js";
import { SqlParams } from "./hot-store/params.js";
import { bucketIdOf, sqlDate, sqlDateOrNull, type BucketKeyRow } from "./hot-store/rows.js";
import { METADATA_TABLE, SCRUB_PROGRESS_TABLE } from "./migrations.js";
import { SqlHotStore } from "./sql-hot-store.js";

/** The longest problem text kept (the report carries the whole of it). */
const MAX_PROBLEM_LENGTH = 2000;

function tableCondition(p: SqlParams, tableId: TableId | undefined): string {
  return tableId === undefined ? "" : ` AND table_id = ${p.text(tableId)}`;
}

/** PUBLISHES: the bucket is still archived as the scrub verified it. */
function PUBLISHES(p: SqlParams, version: VerifiedVersion): string {
  return (
    `${BUCKET(p, version.id)} AND state = 'archived' AND generation = ${p.int(version.generation)} ` +
    `AND manifest_key = ${p.text(version.manifestKey)}`
  );
}

/** NO_MARK_SINCE: no corrupt mark landed since the verification read the bucket. */
function NO_MARK_SINCE(p: SqlParams, version: VerifiedVersion): string {
  return `corrupt_marks = ${p.int(version.marksSeen)}`;
}

export class SqlScrubStore implements ScrubStore {
  constructor(private readonly db: SqlDatabase) {}

  async candidates(options: {
    tableId?: TableId;
    limit: number;
    after?: ScrubCursor;
    verifiedBefore: Date;
  }): Promise<ScrubCandidate[]> {
    // Two index ranges in turn, each a keyset walk: the never-verified
    // buckets by key, then the verified ones by (verified_at, key). Row
    // comparisons with a NULL are unknown, hence the split.
    const found: ScrubCandidate[] = [];
    const { after } = options;
    if (after === undefined || after.verifiedAt === null) {
      const p = new SqlParams();
      const keyset =
        after === undefined
          ? ""
          : ` AND (table_id, partition_key, bucket_key) > (${p.text(after.id.tableId)}, ${p.bytes(after.id.partitionKey)}, ${p.text(after.id.bucketKey)})`;
      found.push(
        ...(await this.#page(
          p,
          `verified_at IS NULL${keyset}${tableCondition(p, options.tableId)}`,
          "table_id, partition_key, bucket_key",
          options.limit,
        )),
      );
    }
    if (found.length < options.limit) {
      const p = new SqlParams();
      const from = after?.verifiedAt ?? null;
      const keyset =
        from === null || after === undefined
          ? ""
          : ` AND (verified_at, table_id, partition_key, bucket_key) > (${p.time(from)}, ${p.text(after.id.tableId)}, ${p.bytes(after.id.partitionKey)}, ${p.text(after.id.bucketKey)})`;
      found.push(
        ...(await this.#page(
          p,
          `verified_at < ${p.time(options.verifiedBefore)}${keyset}${tableCondition(p, options.tableId)}`,
          "verified_at, table_id, partition_key, bucket_key",
          options.limit - found.length,
        )),
      );
    }
    return found;
  }

  async #page(
    p: SqlParams,
    condition: string,
    order: string,
    limit: number,
  ): Promise<ScrubCandidate[]> {
    const { rows } = await this.db.query<BucketKeyRow & { verified_at: string | null }>(
      `SELECT table_id, partition_key, bucket_key, verified_at FROM ${METADATA_TABLE}
        WHERE state = 'archived' AND ${condition}
        ORDER BY ${order} LIMIT ${p.int(limit)}`,
      p.values,
    );
    return rows.map((row) => ({ id: bucketIdOf(row), verifiedAt: sqlDateOrNull(row.verified_at) }));
  }

  async countArchived(tableId?: TableId): Promise<number> {
    const p = new SqlParams();
    const { rows } = await this.db.query<{ n: string | number }>(
      `SELECT count(*) AS n FROM ${METADATA_TABLE} WHERE state = 'archived'${tableCondition(p, tableId)}`,
      p.values,
    );
    return Number(rows[0]?.n ?? 0);
  }

  async countDue(before: Date, tableId?: TableId): Promise<number> {
    const p = new SqlParams();
    const { rows } = await this.db.query<{ n: string | number }>(
      `SELECT count(*) AS n FROM ${METADATA_TABLE}
        WHERE state = 'archived' AND (verified_at IS NULL OR verified_at < ${p.time(before)})${tableCondition(p, tableId)}`,
      p.values,
    );
    return Number(rows[0]?.n ?? 0);
  }

  async recordVerified(
    version: VerifiedVersion,
    now: Date,
  ): Promise<"recorded" | "changed" | "marked-since"> {
    const p = new SqlParams();
    const { rows } = await this.db.write<{ bucket_key: string }>(
      `UPDATE ${METADATA_TABLE}
          SET verified_at = ${p.time(now)}, corrupt_at = NULL, corrupt_problem = NULL
        WHERE ${PUBLISHES(p, version)} AND ${NO_MARK_SINCE(p, version)}
        RETURNING bucket_key`,
      p.values,
      "recordVerified",
    );
    if (rows.length > 0) return "recorded";
    // Refused: say why, from a fresh read (a lost reply resolves the same way).
    const q = new SqlParams();
    const found = await this.db.query<{
      corrupt_marks: string | number;
      verified_at: string | null;
    }>(
      `SELECT corrupt_marks, verified_at FROM ${METADATA_TABLE} WHERE ${PUBLISHES(q, version)}`,
      q.values,
    );
    const row = found.rows[0];
    if (row === undefined) return "changed";
    if (Number(row.corrupt_marks) !== version.marksSeen) return "marked-since";
    // Same version, same marks: only our own write, landed, explains it.
    return sqlDateOrNull(row.verified_at)?.getTime() === now.getTime() ? "recorded" : "changed";
  }

  async markCorrupt(version: VerifiedVersion, now: Date, problem: string): Promise<boolean> {
    const p = new SqlParams();
    // An existing mark keeps its time: it says since when the bucket is known bad.
    const { rows } = await this.db.write<{ bucket_key: string }>(
      `UPDATE ${METADATA_TABLE}
          SET corrupt_at = COALESCE(corrupt_at, ${p.time(now)}),
              corrupt_problem = ${p.text(problem.slice(0, MAX_PROBLEM_LENGTH))},
              corrupt_marks = corrupt_marks + 1
        WHERE ${PUBLISHES(p, version)}
        RETURNING bucket_key`,
      p.values,
      "markCorrupt",
    );
    return rows.length > 0;
  }

  async corruptBuckets(limit: number): Promise<{ total: number; buckets: CorruptBucket[] }> {
    const p = new SqlParams();
    const { rows } = await this.db.query<
      BucketKeyRow & { corrupt_at: string; corrupt_problem: string | null }
    >(
      `SELECT table_id, partition_key, bucket_key, corrupt_at, corrupt_problem FROM ${METADATA_TABLE}
        WHERE corrupt_at IS NOT NULL
        ORDER BY corrupt_at, table_id, partition_key, bucket_key LIMIT ${p.int(limit)}`,
      p.values,
    );
    const counted = await this.db.query<{ n: string | number }>(
      `SELECT count(*) AS n FROM ${METADATA_TABLE} WHERE corrupt_at IS NOT NULL`,
    );
    return {
      total: Number(counted.rows[0]?.n ?? 0),
      buckets: rows.map((row) => ({
        id: bucketIdOf(row),
        corruption: { at: sqlDate(row.corrupt_at), problem: row.corrupt_problem ?? "" },
      })),
    };
  }

  async recordRun(
    root: string,
    run: { at: Date; verified: number; corrupt: number; completed: boolean },
  ): Promise<void> {
    const p = new SqlParams();
    const at = p.time(run.at);
    const completed = run.completed ? at : "NULL::TIMESTAMPTZ";
    await this.db.write(
      `INSERT INTO ${SCRUB_PROGRESS_TABLE} AS s
         (archive_root, last_run_at, last_run_verified, last_run_corrupt, last_completed_at, updated_at)
       VALUES (${p.text(root)}, ${at}, ${p.int(run.verified)}, ${p.int(run.corrupt)}, ${completed}, ${at})
       ON CONFLICT (archive_root) DO UPDATE
         SET last_run_at = excluded.last_run_at, last_run_verified = excluded.last_run_verified,
             last_run_corrupt = excluded.last_run_corrupt,
             last_completed_at = COALESCE(excluded.last_completed_at, s.last_completed_at),
             updated_at = excluded.updated_at`,
      p.values,
      "recordScrubRun",
    );
  }

  async readRun(root: string): Promise<ScrubRun | null> {
    const p = new SqlParams();
    const { rows } = await this.db.query<{
      archive_root: string;
      last_run_at: string;
      last_run_verified: string | number;
      last_run_corrupt: string | number;
      last_completed_at: string | null;
    }>(
      `SELECT archive_root, last_run_at, last_run_verified, last_run_corrupt, last_completed_at
         FROM ${SCRUB_PROGRESS_TABLE} WHERE archive_root = ${p.text(root)}`,
      p.values,
    );
    const row = rows[0];
    if (row === undefined) return null;
    return {
      root: row.archive_root,
      lastRunAt: sqlDate(row.last_run_at),
      lastRunVerified: Number(row.last_run_verified),
      lastRunCorrupt: Number(row.last_run_corrupt),
      lastCompletedAt: sqlDateOrNull(row.last_completed_at),
    };
  }
}

/** The scrub store on the hot store's database, or null for a hot store that is not SQL. */
export function scrubStoreOf(hotStore: HotStore): ScrubStore | null {
  return hotStore instanceof SqlHotStore ? new SqlScrubStore(hotStore.db) : null;
}
