/**
 * The archive queried in place: a DuckDB full scan of a published bucket
 * through the query catalog (`queryArchive`, the code behind `pulpitum
 * query`: catalog listing, DuckDB start-up, the view, the scan), side by
 * side with a `COPY ... TO STDOUT` of the same rows from PostgreSQL in the
 * same run. Goal: `query_vs_copy_ratio` >= 1.0, an archived scan no slower
 * than reading the hot store. Each side is run once to warm caches, then
 * three times; the median counts.
 *
 * Part of `npm run bench` (bench/run.ts), or on its own:
 *
 *     npx tsx bench/query-scan.ts [--rows 1000000]
 *
 * which starts a throwaway PostgreSQL (unless DATABASE_URL is set), seeds
 * one bucket, archives it through claim, export, seal and publish on the
 * file store, and measures.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { execFileSync } from "node:child_process";
import type { BucketId } from "../src/domain/bucket.js";
import type { TableId } from "../src/domain/table.js";
import type { HotStore } from "../src/ports/hot-store.js";
import type { ObjectStore } from "../src/ports/object-store.js";
import { queryArchive } from "../src/read/query-archive.js";
import { jsonValue } from "../src/read/query-values.js";
import { runNextPhase } from "../src/usecases/run-next-phase.js";
import { copyBucket } from "./measurements.js";
import {
  benchContext,
  benchSettings,
  freshExportTable,
  exportBucketId,
  median,
  seedBucket,
  withBenchSession,
  SNAPSHOT_PAGE_SIZE,
} from "./support.js";

export interface QueryScanResult {
  readonly rows: number;
  readonly payloads: number;
  readonly query_seconds: number;
  readonly copy_seconds: number;
  readonly query_full_scan_rows_per_s: number;
  readonly copy_rows_per_s: number;
  readonly query_vs_copy_ratio: number;
}

/** Reads every column of every row: no answer comes from Parquet metadata alone. */
export function fullScanSql(tableId: TableId): string {
  return (
    "SELECT count(*) AS n, sum(octet_length(partition_key) + octet_length(sort_key) + " +
    `octet_length(value)) AS bytes, min(event_time) AS first, max(event_time) AS last FROM "${tableId}"`
  );
}

/**
 * Measure on `bucket`, the only published bucket of its table, which still
 * holds its hot rows (cleanup not run), archived under the bench prefix.
 */
export async function measureQueryScan(
  databaseUrl: string,
  hotStore: HotStore,
  objectStore: ObjectStore,
  bucket: BucketId,
  rows: number,
  tempDir: string,
): Promise<QueryScanResult> {
  const input = {
    databaseUrl,
    hotStore,
    objectStore,
    archivePrefix: benchSettings(SNAPSHOT_PAGE_SIZE, tempDir).archivePrefix,
    tableId: bucket.tableId,
    bucket,
    rows,
    tempDir,
  };
  const scan = async () => {
    const started = performance.now();
    const result = await queryArchive({
      hotStore: input.hotStore,
      objectStore: input.objectStore,
      archivePrefix: input.archivePrefix,
      tableId: input.tableId,
      sql: fullScanSql(input.tableId),
      tempDir: input.tempDir,
    });
    const seconds = (performance.now() - started) / 1000;
    const n = jsonValue(result.rows[0]![0]!);
    if (n !== input.rows)
      throw new Error(`the scan counted ${String(n)} rows, expected ${input.rows}`);
    return { seconds, payloads: result.payloads };
  };
  const copy = () => copyBucket(input.databaseUrl, input.bucket);
  const warm = await scan();
  await copy();
  const scans: number[] = [];
  const copies: number[] = [];
  for (let i = 0; i < 3; i++) {
    scans.push((await scan()).seconds);
    copies.push((await copy()).seconds);
  }
  const querySeconds = median(scans);
  const copySeconds = median(copies);
  return {
    rows: input.rows,
    payloads: warm.payloads,
    query_seconds: querySeconds,
    copy_seconds: copySeconds,
    query_full_scan_rows_per_s: input.rows / querySeconds,
    copy_rows_per_s: input.rows / copySeconds,
    query_vs_copy_ratio: copySeconds / querySeconds,
  };
}

async function main(): Promise<void> {
  const rowsArg = process.argv.indexOf("--rows");
  const rows = rowsArg >= 0 ? Number(process.argv[rowsArg + 1]) : 1_000_000;
  const session = { workPrefix: "pulpitum-query-bench-", connections: 4 };
  await withBenchSession(session, async ({ databaseUrl, db, store, work }) => {
    const storeRoot = path.join(work, "store");
    const ctx = benchContext(databaseUrl, storeRoot, SNAPSHOT_PAGE_SIZE, work);
    try {
      await freshExportTable(db, store);
      const bucket = await seedBucket(store, 1, rows);
      console.error(`seeded ${rows} rows; archiving them (claim, export, seal, publish)`);
      for (const phase of ["claim", "export", "seal", "publish"]) {
        const outcome = await runNextPhase(ctx, exportBucketId(1));
        if (outcome.phase !== phase || outcome.result !== "advanced")
          throw new Error(`${phase} did not advance: ${JSON.stringify(outcome)}`);
      }
      const result = await measureQueryScan(
        databaseUrl,
        store,
        ctx.objectStore,
        bucket,
        rows,
        work,
      );
      console.log(
        JSON.stringify({ ...result, uptime: execFileSync("uptime").toString().trim() }, null, 2),
      );
    } finally {
      await ctx.hotStore.close();
    }
  });
}

/** The figures `npm run bench` records, and its summary line: goal, measured, target, met. */
export function queryScanFigures(result: QueryScanResult) {
  const fmt = (n: number) => n.toLocaleString("en-US", { maximumFractionDigits: 0 });
  return {
    results: {
      query_full_scan_rows_per_s: result.query_full_scan_rows_per_s,
      query_vs_copy_ratio: result.query_vs_copy_ratio,
      query_scan: result,
    },
    line: [
      `DuckDB scan of ${fmt(result.rows)} archived rows vs COPY`,
      `${fmt(result.query_full_scan_rows_per_s)} / ${fmt(result.copy_rows_per_s)} rows/s = ${result.query_vs_copy_ratio.toFixed(2)}`,
      ">= 1.0",
      result.query_vs_copy_ratio >= 1.0,
    ] as const,
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
