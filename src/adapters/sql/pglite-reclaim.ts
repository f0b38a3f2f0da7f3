/**
 * Giving the embedded store's disk space back after cleanup.
 *
 * Cleanup deletes an archived bucket's hot rows, which leaves dead tuples in
 * the records table. PGlite runs no autovacuum (it is one backend without
 * background workers), and even a plain VACUUM only makes the pages reusable:
 * the file shrinks only by its empty tail, and archived rows are the oldest,
 * at the head of the heap. So a home never shrinks on its own. Measured on a
 * home of 200,000 rows of which 85% were archived (data directory 185.5 MB,
 * 88.9 MB of it table files): CHECKPOINT reclaims nothing; VACUUM of the
 * records table 16 MB (WAL segments only) in 1.1 s; VACUUM FULL of the
 * records table 74 MB in 0.25 s (the table files 88.9 -> 31.0 MB), because it
 * copies only the live rows. VACUUM FULL is what is done here.
 *
 * It is safe: VACUUM FULL writes a new copy of the table and swaps it in at
 * commit, so a failure (a full disk) leaves the old table as it was. It needs
 * free space for the live rows' copy, and it holds the table exclusively
 * while it runs: this process's other queries wait, which is why the CLI
 * runs it after a command's work, never during it. Other processes cannot
 * be waiting (the embedded store serves one process at a time).
 */
import { readdirSync, statSync } from "node:fs";
import path from "node:path";
import type { HotStore } from "../../ports/hot-store.js";
import { METADATA_TABLE, PARTS_TABLE, RECORDS_TABLE } from "./migrations.js";
import { PgliteDatabase } from "./pglite-database.js";
import { SqlHotStore } from "./sql-hot-store.js";

/** What a reclaim did, in bytes of the data directory. */
export interface ReclaimResult {
  readonly bytesBefore: number;
  readonly bytesAfter: number;
  /** The same, without the write-ahead log (`pg_wal`), whose segments PostgreSQL keeps for reuse. */
  readonly tableBytesBefore: number;
  readonly tableBytesAfter: number;
  readonly ms: number;
}

/**
 * Rows a run's cleanup must have deleted before it reclaims on its own. At
 * the archiver's pace (a few thousand rows a second) deleting them took
 * seconds; the reclaim costs a fraction of that (see the module comment).
 */
export const AUTO_RECLAIM_MIN_DELETED_ROWS = 10_000;

/**
 * VACUUM FULL copies every live row, so a run reclaims on its own only when
 * what it deleted is at least this share of what is left: deleting 10,000
 * rows must not cost a rewrite of ten million.
 */
export const AUTO_RECLAIM_MIN_DELETED_PER_LIVE_ROW = 0.25;

/** Pages of the records table a live-row estimate reads, at most. */
const SAMPLED_PAGES = 1_000;

/** Whether a run that deleted `deletedRows` should reclaim (see the constants above). */
export async function worthReclaiming(db: PgliteDatabase, deletedRows: number): Promise<boolean> {
  if (deletedRows < AUTO_RECLAIM_MIN_DELETED_ROWS) return false;
  return deletedRows >= (await estimatedLiveRows(db)) * AUTO_RECLAIM_MIN_DELETED_PER_LIVE_ROW;
}

/**
 * Live rows of the records table, counted in a sample of about
 * {@link SAMPLED_PAGES} pages (all of a smaller table): a full count would
 * read the whole table, dead rows included.
 */
export async function estimatedLiveRows(db: PgliteDatabase): Promise<number> {
  const { rows: size } = await db.query<{ pages: string | number }>(
    `SELECT pg_relation_size('${RECORDS_TABLE}') / current_setting('block_size')::int8 AS pages`,
  );
  const pages = Number(size[0]?.pages ?? 0);
  const percent = pages <= SAMPLED_PAGES ? 100 : (100 * SAMPLED_PAGES) / pages;
  // REPEATABLE: the same pages for the same table, so one home always gets the same answer.
  const sample = percent >= 100 ? "" : ` TABLESAMPLE SYSTEM (${percent.toFixed(6)}) REPEATABLE (1)`;
  const { rows } = await db.query<{ n: string | number }>(
    `SELECT count(*) AS n FROM ${RECORDS_TABLE}${sample}`,
  );
  return (Number(rows[0]?.n ?? 0) * 100) / Math.min(100, percent);
}

/** The tables rewritten: the records, and the metadata rows every phase updates. */
const RECLAIMED_TABLES = [RECORDS_TABLE, METADATA_TABLE, PARTS_TABLE];

/** The embedded database behind a hot store, or null when it is another kind. */
export function embeddedDatabaseOf(hotStore: HotStore): PgliteDatabase | null {
  return hotStore instanceof SqlHotStore && hotStore.db instanceof PgliteDatabase
    ? hotStore.db
    : null;
}

/** Bytes of the regular files under `dir`, or 0 when it does not exist. */
export function directoryBytes(dir: string, skip: ReadonlySet<string> = new Set()): number {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  let total = 0;
  for (const entry of entries) {
    if (skip.has(entry.name)) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += directoryBytes(full);
    else if (entry.isFile()) total += statSync(full).size;
  }
  return total;
}

/** Bytes of the data directory's table files: everything but the write-ahead log. */
export function tableBytes(dataDir: string): number {
  return directoryBytes(dataDir, new Set(["pg_wal"]));
}

/**
 * Hot rows deleted by cleanup so far, from the metadata (cheap: one row per
 * bucket). A run's difference says how much it deleted.
 */
export async function cleanedUpRows(db: PgliteDatabase): Promise<number> {
  const { rows } = await db.query<{ n: string | number | null }>(
    `SELECT coalesce(sum(payload_rows), 0) AS n FROM ${METADATA_TABLE} WHERE hot_deleted`,
  );
  return Number(rows[0]?.n ?? 0);
}

/** Rewrite the tables cleanup empties and checkpoint, so the files shrink. */
export async function reclaimSpace(db: PgliteDatabase, dataDir: string): Promise<ReclaimResult> {
  const bytesBefore = directoryBytes(dataDir);
  const tableBytesBefore = tableBytes(dataDir);
  const started = Date.now();
  await db.maintenance(`VACUUM FULL ${RECLAIMED_TABLES.join(", ")}`);
  // The old files are removed at the checkpoint after the commit.
  await db.maintenance("CHECKPOINT");
  return {
    bytesBefore,
    bytesAfter: directoryBytes(dataDir),
    tableBytesBefore,
    tableBytesAfter: tableBytes(dataDir),
    ms: Date.now() - started,
  };
}
