/**
 * Fixtures shared by the bench's parent and child processes: the tables and
 * buckets it creates, how it seeds them in bulk (server-side, so seeding
 * never inflates a measured process's memory), and the archiver context the
 * measured phases run with.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { FileObjectStore } from "../src/adapters/object-store/filesystem.js";
import { PgDatabase } from "../src/adapters/sql/database.js";
import { METADATA_TABLE, RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import { SqlHotStore } from "../src/adapters/sql/sql-hot-store.js";
import { bucketForTime, type BucketId } from "../src/domain/bucket.js";
import { fixedCutoff } from "../src/domain/cutoff.js";
import { parseTableId, type TableId } from "../src/domain/table.js";
import { formatMicrosRfc3339, parseRfc3339Micros, type EpochMicros } from "../src/domain/time.js";
import { systemClock } from "../src/ports/clock.js";
import type { ArchiverContext, ArchiverSettings } from "../src/usecases/context.js";
import { startPostgres, type RunningService } from "../test/support/services.js";

export const VALUE_BYTES = 200;
/** Snapshot page size of every measured export (the default of ARCHIVER_SNAPSHOT_PAGE_SIZE). */
export const SNAPSHOT_PAGE_SIZE = 5000;
export const EXPORT_TABLE: TableId = parseTableId("bench_export");
export const APPEND_TABLE: TableId = parseTableId("bench_append");
export const DISCOVERY_TABLE: TableId = parseTableId("bench_discovery");
export const CONTENTION_TABLE: TableId = parseTableId("bench_contention");
export const PLAIN_RECORDS_TABLE = "bench_plain_records";
export const PARTITION_KEY = Buffer.from("tenant-0001");
/** Rows are 8 ms apart (plus a sub-millisecond part), so 10M rows fit in one day bucket. */
const ROW_STEP_MICROS = 8000n;
/** Buckets are at least this far in the past, so they are eligible for any cutoff the bench uses. */
export const CUTOFF = new Date("2025-01-01T00:00:00Z");

/** The value given after `name` on the command line (`--runs 3`), if any. */
export function commandOption(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

/** The machine's 1, 5 and 15-minute load averages, printed beside a figure. */
export function loadAverages(): string {
  return os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(" ");
}

/** Day `index` (from 2024-01-01) of the export table: a bucket of its own per measured size. */
export function exportBucketStart(index: number): EpochMicros {
  return parseRfc3339Micros("2024-01-01T00:00:00Z") + BigInt(index) * 86_400_000_000n;
}

export function exportBucketId(index: number): BucketId {
  return {
    tableId: EXPORT_TABLE,
    partitionKey: PARTITION_KEY,
    bucketKey: bucketForTime("CalendarDayUtc", exportBucketStart(index)).key,
  };
}

/** Event time of row `i` of a bucket starting at `start`; the same rule the seed SQL applies. */
export function rowTime(start: EpochMicros, i: number): EpochMicros {
  return start + BigInt(i) * ROW_STEP_MICROS + BigInt(i % 997);
}

export function sortKeyOf(i: number): Buffer {
  const key = Buffer.allocUnsafe(8);
  key.writeBigInt64BE(BigInt(i));
  return key;
}

/** Random bytes the seeded values are cut from (the first 32 bytes of each value are unique). */
const POOL = randomBytes(1 << 20);

export function valueOf(i: number): Buffer {
  const offset = (i * 7919) % (POOL.length - VALUE_BYTES);
  return Buffer.from(POOL.subarray(offset, offset + VALUE_BYTES));
}

/**
 * Fill `bucket` with `rows` records: row 0 through {@link SqlHotStore.append}
 * (which creates the bucket's metadata row as production does), the rest with
 * server-side `INSERT … SELECT generate_series` in chunks. Values are a
 * 32-byte unique digest followed by 168 bytes cut from a random pool, so they
 * compress about as little as real payloads do.
 */
export async function seedBucket(
  store: SqlHotStore,
  index: number,
  rows: number,
  progress: (done: number) => void = () => undefined,
): Promise<BucketId> {
  const id = exportBucketId(index);
  const start = exportBucketStart(index);
  await store.append(
    EXPORT_TABLE,
    [
      {
        partitionKey: PARTITION_KEY,
        eventTime: rowTime(start, 0),
        sortKey: sortKeyOf(0),
        value: valueOf(0),
      },
    ],
    new Date(),
  );
  const chunk = 500_000;
  for (let from = 1; from < rows; from += chunk) {
    const to = Math.min(rows - 1, from + chunk - 1);
    await store.db.query(
      `INSERT INTO ${RECORDS_TABLE} (table_id, partition_key, bucket_key, event_time, sort_key, value)
       SELECT $1, $2::BYTEA, $3, $4::TIMESTAMPTZ + make_interval(secs => (i * ${ROW_STEP_MICROS} + i % 997) / 1e6),
              int8send(i),
              sha256(int8send(i)) || substring($5::BYTEA FROM ((i * 7919) % ${POOL.length - 168})::INT + 1 FOR 168)
         FROM generate_series($6::INT8, $7::INT8) AS i`,
      [id.tableId, PARTITION_KEY, id.bucketKey, formatMicrosRfc3339(start), POOL, from, to],
    );
    progress(to + 1);
  }
  await store.db.query(`ANALYZE ${RECORDS_TABLE}`);
  return id;
}

/**
 * `rows` bucket-metadata rows for discovery, shaped like a long-running
 * deployment: most buckets archived with hot rows deleted, some hot and not
 * yet closed, a few eligible, stalled or awaiting cleanup.
 */
export async function seedDiscoveryMetadata(db: PgDatabase, rows: number): Promise<void> {
  const chunk = 250_000;
  for (let from = 0; from < rows; from += chunk) {
    const to = Math.min(rows, from + chunk) - 1;
    await db.query(
      `INSERT INTO ${METADATA_TABLE}
         (table_id, partition_key, bucket_key, bucket_strategy, bucket_start, bucket_end,
          state, phase, generation, attempts, hot_deleted, created_at, updated_at)
       SELECT $1, int8send(i), 'CalendarDayUtc:' || i, 'CalendarDayUtc',
              s.start, s.start + interval '1 day',
              s.state, s.phase, 1, 0, s.hot_deleted, now(), now()
         FROM generate_series($2::INT8, $3::INT8) AS i,
      LATERAL (SELECT TIMESTAMPTZ '2020-01-01 00:00:00+00' + (i % 3000) * interval '1 day' AS start,
                      CASE WHEN i % 100 < 90 THEN 'archived' WHEN i % 100 < 97 THEN 'hot'
                           WHEN i % 100 < 98 THEN 'archiving' ELSE 'archived' END AS state,
                      CASE WHEN i % 100 < 90 THEN 'done' WHEN i % 100 < 97 THEN 'claim'
                           WHEN i % 100 < 98 THEN 'export' ELSE 'cleanup' END AS phase,
                      i % 100 < 90 AS hot_deleted) s`,
      [DISCOVERY_TABLE, from, to],
    );
  }
  await db.query(`ANALYZE ${METADATA_TABLE}`);
}

/** A progress line on stderr stamped with the seconds since `started`, so a long run shows where it is. */
export function progressLog(started: number): (message: string) => void {
  return (message) =>
    console.error(
      `[${((performance.now() - started) / 1000).toFixed(0).padStart(4)} s] ${message}`,
    );
}

/**
 * The PostgreSQL a bench measures: `DATABASE_URL` when set, else a throwaway
 * server started here, which the caller stops (`service`) when done.
 */
export async function benchPostgres(
  log?: (message: string) => void,
): Promise<{ url: string; service?: RunningService }> {
  const url = process.env.DATABASE_URL;
  if (url) return { url };
  const service = await startPostgres();
  log?.(`started a throwaway PostgreSQL at ${service.url}`);
  return { url: service.url, service };
}

export interface BenchSession {
  readonly databaseUrl: string;
  readonly db: PgDatabase;
  readonly store: SqlHotStore;
  /** A scratch directory, removed afterwards. */
  readonly work: string;
}

/**
 * Run `body` against the bench's PostgreSQL, migrated, with a scratch
 * directory; then close the store and the database, remove the directory and
 * stop a server started here, whether `body` succeeded or not.
 */
export async function withBenchSession<T>(
  options: {
    readonly workPrefix: string;
    readonly connections: number;
    readonly log?: (message: string) => void;
  },
  body: (session: BenchSession) => Promise<T>,
): Promise<T> {
  const { url: databaseUrl, service } = await benchPostgres(options.log);
  const work = await mkdtemp(path.join(os.tmpdir(), options.workPrefix));
  const db = new PgDatabase(databaseUrl, { max: options.connections });
  const store = new SqlHotStore(db, { ownsDatabase: false });
  try {
    await store.migrate();
    return await body({ databaseUrl, db, store, work });
  } finally {
    await store.close();
    await db.close();
    await rm(work, { recursive: true, force: true });
    await service?.stop();
  }
}

/** Delete a bench table's records and metadata: a rerun against the same DATABASE_URL starts from empty. */
export async function clearBenchTable(db: PgDatabase, tableId: TableId): Promise<void> {
  await db.query(`DELETE FROM ${RECORDS_TABLE} WHERE table_id = $1`, [tableId]);
  await db.query(`DELETE FROM ${METADATA_TABLE} WHERE table_id = $1`, [tableId]);
}

/** The export table, emptied and registered (day buckets, Parquet) for a run that seeds it. */
export async function freshExportTable(db: PgDatabase, store: SqlHotStore): Promise<void> {
  await clearBenchTable(db, EXPORT_TABLE);
  await store.registerTable(
    {
      tableId: EXPORT_TABLE,
      strategy: "CalendarDayUtc",
      format: "parquet",
      writableBuckets: null,
    },
    new Date(),
  );
}

export function benchSettings(snapshotPageSize: number, tempDir: string): ArchiverSettings {
  return Object.freeze({
    cutoff: fixedCutoff(CUTOFF),
    leaseMs: 120_000,
    renewalMs: 30_000,
    retryMs: 60_000,
    requeueMs: 300_000,
    scanLimit: 64,
    snapshotPageSize,
    cleanupBatchSize: 10_000,
    cleanupMaxRowsPerSecond: 0,
    archivePrefix: "bench",
    tempDir,
  });
}

export function benchContext(
  databaseUrl: string,
  storeRoot: string,
  snapshotPageSize: number,
  tempDir: string,
): ArchiverContext & { hotStore: SqlHotStore } {
  const hotStore = new SqlHotStore(new PgDatabase(databaseUrl, { max: 4 }));
  return {
    hotStore,
    objectStore: new FileObjectStore(storeRoot),
    clock: systemClock,
    settings: benchSettings(snapshotPageSize, tempDir),
    log: {
      info() {},
      warn: (message, fields) => console.error("warn:", message, JSON.stringify(fields)),
      error: (message, fields) => console.error("error:", message, JSON.stringify(fields)),
    },
  };
}

/**
 * Run a child process and resolve its last stdout line as JSON: by default
 * bench/run.ts under tsx with `--child kind args`; with `bundle`, that
 * esbuild bundle under plain node with `--kind-child args`.
 */
export async function runChild<T>(kind: string, args: unknown, bundle?: string): Promise<T> {
  const script = fileURLToPath(new URL("./run.ts", import.meta.url));
  const argv =
    bundle === undefined
      ? ["--import", "tsx", script, "--child", kind, JSON.stringify(args)]
      : [bundle, `--${kind}-child`, JSON.stringify(args)];
  return await new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      argv,
      { encoding: "utf8", maxBuffer: 16 << 20, env: process.env },
      (error, stdout) => {
        if (error) {
          reject(error);
          return;
        }
        const last = stdout.trim().split("\n").pop() ?? "";
        resolve(JSON.parse(last) as T);
      },
    );
    child.stderr?.pipe(process.stderr);
  });
}

/** Median of a list of numbers. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
