/**
 * Issue 8's benchmarks, side by side on one PostgreSQL:
 *
 *   npm run bench              # 1M-row export vs COPY, RSS at 1M and 10M, 1M discovery rows, 10M rows in 1M-row parts
 *   npm run bench -- --quick   # 1M-row export vs COPY, RSS at 200k and 1M, 100k discovery rows, 1M rows in 250k-row parts
 *
 * Starts a throwaway PostgreSQL (test/support/services.ts) unless
 * DATABASE_URL is set, and moto's S3 unless AWS_ENDPOINT_URL is set, prints
 * a table and writes bench/results.json. Every
 * figure comes from the production code paths: exports run `runNextPhase`
 * (claim, then the timed export phase with its real lease, fenced snapshot,
 * Zstd Parquet, SHA-256, file-store upload and read-back verification), reads
 * go through DurableTable (first page of the archived bucket on the file
 * store and, copied there, on moto S3), appends through SqlHotStore.append.
 * Each export
 * runs in a child process of its own so its peak RSS (getrusage maxRSS)
 * belongs to that size alone.
 *
 * Figures are printed and recorded, never asserted.
 */
import { writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import { FileObjectStore } from "../src/adapters/object-store/filesystem.js";
import { runNextPhase } from "../src/usecases/run-next-phase.js";
import { stackSettings } from "../infra/settings.js";
import {
  bundleExportChild,
  exportChild,
  type ExportArgs,
  type ExportResult,
} from "./export-child.js";
import { breakdownChild, type Breakdown } from "./breakdown-child.js";
import { arrowPeer, type ArrowPeerOutcome } from "./arrow-peer.js";
import { segmentedExports, segmentedLines, segmentedPlan } from "./segmented.js";
import { cleanupCurve, hotBucketContention } from "./hot-store.js";
import { measureQueryScan, queryScanFigures } from "./query-scan.js";
import {
  appendsVsInserts,
  copyBucket,
  discovery,
  firstPage,
  firstPageOnS3,
} from "./measurements.js";
import {
  APPEND_TABLE,
  benchContext,
  clearBenchTable,
  CONTENTION_TABLE,
  DISCOVERY_TABLE,
  EXPORT_TABLE,
  exportBucketId,
  PLAIN_RECORDS_TABLE,
  progressLog,
  runChild,
  SNAPSHOT_PAGE_SIZE,
  seedBucket,
  seedDiscoveryMetadata,
  VALUE_BYTES,
  withBenchSession,
} from "./support.js";

/** Buckets of the bundled exports are this many days after the tsx exports' ones. */
const BUNDLED_BUCKET_OFFSET = 10;
/** The first of the concurrent exports' buckets. */
const CONCURRENT_BUCKETS_FROM = 30;
/** Concurrent exports must fit in this share of the worker's default memory (the rest is margin). */
const CONCURRENT_RSS_SHARE = 0.75;

interface Plan {
  readonly quick: boolean;
  /** Export sizes; the 1M bucket is also the one compared with COPY and read from. */
  readonly exportRows: readonly number[];
  readonly ratioRows: number;
  readonly discoveryRows: number;
  readonly appendRows: number;
  readonly appendBatch: number;
  /** Rows of each bucket exported concurrently (as many as the worker's default batch size). */
  readonly concurrentRows: number;
}

function planFor(quick: boolean): Plan {
  return quick
    ? {
        quick,
        exportRows: [200_000, 1_000_000],
        ratioRows: 1_000_000,
        discoveryRows: 100_000,
        appendRows: 50_000,
        appendBatch: 1000,
        concurrentRows: 200_000,
      }
    : {
        quick,
        exportRows: [1_000_000, 10_000_000],
        ratioRows: 1_000_000,
        discoveryRows: 1_000_000,
        appendRows: 200_000,
        appendBatch: 1000,
        concurrentRows: 1_000_000,
      };
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main(): Promise<void> {
  const plan = planFor(process.argv.includes("--quick"));
  const started = performance.now();
  const log = progressLog(started);
  const session = { workPrefix: "pulpitum-bench-", connections: 4, log };
  await withBenchSession(session, async ({ databaseUrl, db, store, work }) => {
    const server =
      (await db.query<{ version: string }>("SELECT version() AS version")).rows[0]?.version ?? "?";
    // A rerun against the same DATABASE_URL starts from empty bench tables.
    for (const t of [EXPORT_TABLE, APPEND_TABLE, DISCOVERY_TABLE, CONTENTION_TABLE]) {
      await clearBenchTable(db, t);
    }
    await db.query(`DROP TABLE IF EXISTS ${PLAIN_RECORDS_TABLE}`);
    await db.query(`CREATE TABLE ${PLAIN_RECORDS_TABLE} (LIKE ${RECORDS_TABLE} INCLUDING ALL)`);
    for (const tableId of [EXPORT_TABLE, APPEND_TABLE, DISCOVERY_TABLE, CONTENTION_TABLE]) {
      await store.registerTable(
        { tableId, strategy: "CalendarDayUtc", format: "parquet", writableBuckets: null },
        new Date(),
      );
    }

    // Buckets: day index 1 holds ratioRows (compared with COPY, read from); others hold the other sizes.
    const sizes = [...new Set([plan.ratioRows, ...plan.exportRows])];
    const bucketOf = new Map<number, number>();
    sizes.forEach((rows, i) => bucketOf.set(rows, i + 1));
    for (const rows of sizes) {
      await seedBucket(store, bucketOf.get(rows)!, rows, (done) =>
        log(`seeded ${fmt(done)} / ${fmt(rows)} rows`),
      );
    }
    const ratioBucket = exportBucketId(bucketOf.get(plan.ratioRows)!);

    log("first page from the hot store");
    const storeRoot = path.join(work, "store");
    const objects = new FileObjectStore(storeRoot);
    const hotPage = await firstPage(store, objects);

    log("COPY baseline");
    await copyBucket(databaseUrl, ratioBucket); // warm the buffers the same way the export finds them
    const copy = await copyBucket(databaseUrl, ratioBucket);
    log("Arrow peer: binary COPY through psycopg 3 into pyarrow, ZSTD Parquet (Python child)");
    const peer: ArrowPeerOutcome = await arrowPeer(databaseUrl, ratioBucket, work, log).catch(
      (error: unknown) => ({
        kind: "skipped" as const,
        reason: `the peer failed: ${String(error)}`,
      }),
    );
    if (peer.kind === "skipped") log(`Arrow peer skipped: ${peer.reason}`);

    const exports = new Map<number, ExportResult>();
    for (const rows of [plan.ratioRows, ...plan.exportRows.filter((r) => r !== plan.ratioRows)]) {
      log(`export of ${fmt(rows)} rows (child process)`);
      const result = await runChild<ExportResult>("export", {
        databaseUrl,
        bucketIndex: bucketOf.get(rows)!,
        storeRoot,
        tempDir: work,
      } satisfies ExportArgs);
      if (result.rows !== rows)
        throw new Error(`export wrote ${result.rows} rows, expected ${rows}`);
      exports.set(rows, result);
    }

    // The same exports once more, from the worker's esbuild bundle under
    // plain node: what a deployed worker holds, without tsx's loader thread.
    log("bundling the export child with esbuild, as the worker Lambda is bundled");
    const bundle = await bundleExportChild(work);
    const bundled = new Map<number, ExportResult>();
    for (const rows of plan.exportRows) {
      const index = BUNDLED_BUCKET_OFFSET + bucketOf.get(rows)!;
      await seedBucket(store, index, rows);
      log(`export of ${fmt(rows)} rows (bundled child process)`);
      const result = await runChild<ExportResult>(
        "export",
        { databaseUrl, bucketIndex: index, storeRoot, tempDir: work } satisfies ExportArgs,
        bundle,
      );
      if (result.rows !== rows)
        throw new Error(`bundled export wrote ${result.rows} rows, expected ${rows}`);
      bundled.set(rows, result);
    }

    // A worker runs up to workerBatchSize messages of a batch at once.
    const { workerBatchSize, workerMemoryMb } = stackSettings({});
    const concurrentIndexes = Array.from(
      { length: workerBatchSize },
      (_, i) => CONCURRENT_BUCKETS_FROM + i,
    );
    for (const index of concurrentIndexes) await seedBucket(store, index, plan.concurrentRows);
    log(
      `${workerBatchSize} concurrent exports of ${fmt(plan.concurrentRows)} rows in one process (bundled child)`,
    );
    const concurrent = await runChild<ExportResult>(
      "export",
      {
        databaseUrl,
        bucketIndex: concurrentIndexes[0]!,
        concurrentBucketIndexes: concurrentIndexes.slice(1),
        storeRoot,
        tempDir: work,
      } satisfies ExportArgs,
      bundle,
    );
    if (concurrent.rows !== workerBatchSize * plan.concurrentRows)
      throw new Error(`concurrent exports wrote ${concurrent.rows} rows`);

    const segmented = await segmentedExports(
      store,
      databaseUrl,
      work,
      segmentedPlan(plan.quick),
      log,
    );

    log("export breakdown (child process)");
    const breakdown = await runChild<Breakdown>("breakdown", {
      databaseUrl,
      bucketIndex: bucketOf.get(plan.ratioRows)!,
      storeRoot,
      tempDir: work,
    } satisfies ExportArgs);

    log("seal and publish the 1M bucket, then read its first page from the archive");
    const ctx = benchContext(databaseUrl, storeRoot, SNAPSHOT_PAGE_SIZE, work);
    try {
      for (const phase of ["seal", "publish"]) {
        const outcome = await runNextPhase(ctx, ratioBucket);
        if (outcome.phase !== phase || outcome.result !== "advanced")
          throw new Error(`${phase} did not advance: ${JSON.stringify(outcome)}`);
      }
    } finally {
      await ctx.hotStore.close();
    }
    const archivedPage = await firstPage(store, objects);
    log("DuckDB full scan of that bucket through the query catalog, vs COPY");
    const queryScan = queryScanFigures(
      await measureQueryScan(databaseUrl, store, objects, ratioBucket, plan.ratioRows, work),
    );

    log("the same archived bucket on moto S3: first page");
    const s3Page = await firstPageOnS3(store, objects, ratioBucket, log);

    log(`appends vs plain INSERT, ${fmt(plan.appendRows)} rows in batches of ${plan.appendBatch}`);
    const appends = await appendsVsInserts(store, db, plan.appendRows, plan.appendBatch);

    log(`discovery over ${fmt(plan.discoveryRows)} bucket-metadata rows`);
    await seedDiscoveryMetadata(db, plan.discoveryRows);
    const disc = await discovery(store);

    log("30 appenders on one hot bucket vs on 30 buckets, 10 s each");
    const contention = await hotBucketContention(databaseUrl, CONTENTION_TABLE);

    log(`cleanup of the archived ${fmt(plan.ratioRows)}-row bucket, batch by batch`);
    const cleanup = await cleanupCurve(store, ratioBucket, 5000);

    const ratioExport = exports.get(plan.ratioRows)!;
    const bundledRatio = bundled.get(plan.ratioRows)!;
    const bundledRowsPerS = plan.ratioRows / bundledRatio.seconds;
    const exportCpuPerM = (bundledRatio.cpuSeconds / plan.ratioRows) * 1e6;
    const peerResult = peer.kind === "measured" ? peer.result : undefined;
    const peerRowsPerS = peerResult === undefined ? null : peerResult.rows / peerResult.seconds;
    const peerCpuPerM =
      peerResult === undefined ? null : (peerResult.cpuSeconds / peerResult.rows) * 1e6;
    /** Peak RSS of the bundled export at each size, e.g. export_peak_rss_mb_bundled_200k. */
    const rowsLabel = (rows: number) =>
      rows >= 1e6 && rows % 1e6 === 0 ? `${rows / 1e6}m` : `${rows / 1e3}k`;
    const bundledPeaks = Object.fromEntries(
      [...bundled].map(([rows, e]) => [
        `export_peak_rss_mb_bundled_${rowsLabel(rows)}`,
        e.maxRssMb,
      ]),
    );
    const exportRowsPerS = plan.ratioRows / ratioExport.seconds;
    const copyRowsPerS = plan.ratioRows / copy.seconds;
    const appendRowsPerS = plan.appendRows / appends.appendSeconds;
    const insertRowsPerS = plan.appendRows / appends.insertSeconds;
    const results = {
      mode: plan.quick ? "quick" : "full",
      measured_at: new Date().toISOString(),
      // The worker's bundle, as a Lambda runs it (and as the peer ratio below is taken).
      export_vs_copy_ratio: bundledRowsPerS / copyRowsPerS,
      export_tsx_vs_copy_ratio: exportRowsPerS / copyRowsPerS,
      export_checked_on: bundledRatio.checkedOn,
      export_rows_per_s: exportRowsPerS,
      copy_rows_per_s: copyRowsPerS,
      copy_bytes: copy.bytes,
      export_rows: plan.ratioRows,
      export_payload_bytes: ratioExport.bytes,
      export_bundled_rows_per_s: bundledRowsPerS,
      export_cpu_s_per_million_rows: exportCpuPerM,
      export_cpu_s_per_million_rows_tsx: (ratioExport.cpuSeconds / plan.ratioRows) * 1e6,
      arrow_peer_rows_per_s: peerRowsPerS,
      arrow_peer_cpu_s_per_million_rows: peerCpuPerM,
      arrow_peer_vs_copy_ratio: peerRowsPerS === null ? null : peerRowsPerS / copyRowsPerS,
      export_vs_arrow_peer_ratio: peerRowsPerS === null ? null : bundledRowsPerS / peerRowsPerS,
      export_cpu_vs_arrow_peer_cpu_ratio: peerCpuPerM === null ? null : exportCpuPerM / peerCpuPerM,
      arrow_peer: peer,
      export_peak_rss_mb: Math.max(...[...exports.values()].map((e) => e.maxRssMb)),
      export_peak_rss_mb_bundled: Math.max(...[...bundled.values()].map((e) => e.maxRssMb)),
      ...bundledPeaks,
      ...queryScan.results,
      // Every store's snapshot is read by statement (CockroachDB has no binary
      // COPY TO), so the statement path's export is the bundled export above.
      export_query_path_vs_copy_ratio: bundledRowsPerS / copyRowsPerS,
      export_query_path_rows_per_s: bundledRowsPerS,
      concurrent_exports_peak_rss_mb: concurrent.maxRssMb,
      concurrent_exports: {
        exports: workerBatchSize,
        rows_each: plan.concurrentRows,
        seconds: concurrent.seconds,
        rows_per_s: concurrent.rows / concurrent.seconds,
        worker_memory_mb: workerMemoryMb,
        result: concurrent,
      },
      exports: Object.fromEntries([...exports].map(([rows, e]) => [rows, e])),
      exports_bundled: Object.fromEntries([...bundled].map(([rows, e]) => [rows, e])),
      export_breakdown: breakdown,
      ...segmented,
      archived_vs_hot_first_page_ratio: archivedPage.warmMs / hotPage.warmMs,
      archived_vs_hot_first_page_ratio_cold: archivedPage.coldMs / hotPage.coldMs,
      archived_s3_vs_hot_first_page_ratio: s3Page.warmMs / hotPage.warmMs,
      archived_s3_vs_hot_first_page_ratio_cold: s3Page.coldMs / hotPage.coldMs,
      first_page: {
        hot: hotPage,
        archived: archivedPage,
        archived_s3: s3Page,
        bucket_rows: plan.ratioRows,
      },
      discovery_ms: disc.discoverMs,
      discovery_peek_ms: disc.peekMs,
      discovery_metadata_rows: plan.discoveryRows,
      discovery_uses_index: disc.usesIndex,
      discovery_plan: disc.plan,
      append_vs_insert_ratio: appendRowsPerS / insertRowsPerS,
      append_rows_per_s: appendRowsPerS,
      insert_rows_per_s: insertRowsPerS,
      append_rows: plan.appendRows,
      append_batch: plan.appendBatch,
      hot_bucket_append_failures: contention.oneBucket.failures + contention.spread.failures,
      hot_bucket_append_ratio: contention.oneBucket.perS / contention.spread.perS,
      hot_bucket_contention: contention,
      cleanup_batch_ms_first_vs_last: cleanup.lastMs / cleanup.firstMs,
      cleanup_curve: cleanup,
      value_bytes: VALUE_BYTES,
      snapshot_page_size: SNAPSHOT_PAGE_SIZE,
      machine: {
        cpu: os.cpus()[0]?.model ?? "?",
        cpus: os.cpus().length,
        total_memory_mb: Math.round(os.totalmem() / 2 ** 20),
        node: process.version,
        platform: `${os.platform()} ${os.release()}`,
        database: server,
      },
    };
    const file = fileURLToPath(new URL("./results.json", import.meta.url));
    await writeFile(file, `${JSON.stringify(results, null, 2)}\n`);

    /** A goal row; `"info"` rows are context for a goal, not a goal of their own. */
    const line = (goal: string, measured: string, target: string, met: boolean | "info") =>
      console.log(
        `${goal.padEnd(44)} ${measured.padStart(30)}  ${target.padEnd(12)} ${met === "info" ? "" : met ? "met" : "NOT MET"}`,
      );
    console.log(
      `\nPulpitum bench (${results.mode}), ${results.machine.cpus} × ${results.machine.cpu}, Node ${process.version}`,
    );
    console.log(`${"goal".padEnd(44)} ${"measured".padStart(30)}  ${"target".padEnd(12)}`);
    line(
      `export ${fmt(plan.ratioRows)} rows (bundle, verified) vs COPY`,
      `${fmt(bundledRowsPerS)} / ${fmt(copyRowsPerS)} rows/s = ${results.export_vs_copy_ratio.toFixed(2)}`,
      ">= 0.6",
      results.export_vs_copy_ratio >= 0.6,
    );
    line(
      "the same: the statement path (CockroachDB's)",
      `${fmt(results.export_query_path_rows_per_s)} / ${fmt(copyRowsPerS)} rows/s = ${results.export_query_path_vs_copy_ratio.toFixed(2)}`,
      ">= 0.5",
      results.export_query_path_vs_copy_ratio >= 0.5,
    );
    line(
      `export under tsx vs COPY; checked on the ${bundledRatio.checkedOn === "thread" ? "check thread" : "main thread"}`,
      `${fmt(exportRowsPerS)} / ${fmt(copyRowsPerS)} rows/s = ${results.export_tsx_vs_copy_ratio.toFixed(2)}`,
      "(info)",
      "info",
    );
    line(
      `export ${fmt(plan.ratioRows)} rows, bundle, CPU (user+sys)`,
      `${exportCpuPerM.toFixed(2)} core-s per 1M rows`,
      "<= 3.5",
      exportCpuPerM <= 3.5,
    );
    if (peerResult === undefined || peerRowsPerS === null || peerCpuPerM === null) {
      line("Arrow peer (psycopg 3 + pyarrow)", "skipped, see above", "(info)", "info");
    } else {
      line(
        "Arrow peer vs COPY",
        `${fmt(peerRowsPerS)} / ${fmt(copyRowsPerS)} rows/s = ${(peerRowsPerS / copyRowsPerS).toFixed(2)}`,
        "(info)",
        "info",
      );
      line(
        "Arrow peer CPU (user+sys)",
        `${peerCpuPerM.toFixed(2)} core-s per 1M rows`,
        "(info)",
        "info",
      );
      line(
        "export (bundle, verified) vs Arrow peer",
        `${fmt(bundledRowsPerS)} / ${fmt(peerRowsPerS)} rows/s = ${(bundledRowsPerS / peerRowsPerS).toFixed(2)}`,
        ">= 1.25",
        bundledRowsPerS / peerRowsPerS >= 1.25,
      );
      line(
        "export CPU vs Arrow peer CPU, per row",
        `${exportCpuPerM.toFixed(2)} / ${peerCpuPerM.toFixed(2)} core-s = ${(exportCpuPerM / peerCpuPerM).toFixed(2)}`,
        "<= 0.8",
        exportCpuPerM / peerCpuPerM <= 0.8,
      );
    }
    line(...queryScan.line);
    const rssCeiling = Math.floor(workerMemoryMb * CONCURRENT_RSS_SHARE);
    line(
      `${workerBatchSize} concurrent exports, bundle, peak RSS`,
      `${fmt(concurrent.maxRssMb)} MB (${fmt(concurrent.rows / concurrent.seconds)} rows/s)`,
      `<= ${rssCeiling} MB`,
      concurrent.maxRssMb <= rssCeiling,
    );
    line(
      "export peak RSS under tsx (its loader included)",
      `${fmt(results.export_peak_rss_mb)} MB`,
      "(info)",
      "info",
    );
    for (const [rows, e] of bundled) {
      line(
        `export peak RSS, worker bundle, ${fmt(rows)} rows`,
        `${fmt(e.maxRssMb)} MB`,
        "<= 256 MB",
        e.maxRssMb <= 256,
      );
    }
    segmentedLines(segmented, line);
    line(
      "first page archived vs hot (warm)",
      `${archivedPage.warmMs.toFixed(2)} / ${hotPage.warmMs.toFixed(2)} ms = ${results.archived_vs_hot_first_page_ratio.toFixed(2)}`,
      "<= 2",
      results.archived_vs_hot_first_page_ratio <= 2,
    );
    line(
      "first page archived vs hot (cold)",
      `${archivedPage.coldMs.toFixed(2)} / ${hotPage.coldMs.toFixed(2)} ms = ${results.archived_vs_hot_first_page_ratio_cold.toFixed(2)}`,
      "(info)",
      "info",
    );
    line(
      "first page archived on moto S3 vs hot (warm)",
      `${s3Page.warmMs.toFixed(2)} / ${hotPage.warmMs.toFixed(2)} ms = ${results.archived_s3_vs_hot_first_page_ratio.toFixed(2)}`,
      "(info)",
      "info",
    );
    line(
      "first page archived on moto S3 vs hot (cold)",
      `${s3Page.coldMs.toFixed(2)} / ${hotPage.coldMs.toFixed(2)} ms = ${results.archived_s3_vs_hot_first_page_ratio_cold.toFixed(2)}`,
      "(info)",
      "info",
    );
    line(
      `discovery over ${fmt(plan.discoveryRows)} metadata rows`,
      `${disc.discoverMs.toFixed(2)} ms (peek ${disc.peekMs.toFixed(2)})`,
      "<= 50 ms",
      disc.discoverMs <= 50 && disc.usesIndex,
    );
    line(
      `append vs INSERT, batches of ${plan.appendBatch}`,
      `${fmt(appendRowsPerS)} / ${fmt(insertRowsPerS)} rows/s = ${results.append_vs_insert_ratio.toFixed(2)}`,
      ">= 0.7",
      results.append_vs_insert_ratio >= 0.7,
    );
    line(
      `${contention.appenders} appenders on one bucket, ${contention.seconds} s`,
      `${results.hot_bucket_append_failures} failed appends`,
      "0",
      results.hot_bucket_append_failures === 0,
    );
    line(
      "one hot bucket vs one bucket per appender",
      `${fmt(contention.oneBucket.perS)} / ${fmt(contention.spread.perS)} rec/s = ${results.hot_bucket_append_ratio.toFixed(2)}`,
      ">= 0.7",
      results.hot_bucket_append_ratio >= 0.7,
    );
    line(
      `cleanup batches of ${fmt(cleanup.batchRows)}, last vs first`,
      `${cleanup.lastMs.toFixed(1)} / ${cleanup.firstMs.toFixed(1)} ms = ${results.cleanup_batch_ms_first_vs_last.toFixed(2)}`,
      "<= 1.5",
      results.cleanup_batch_ms_first_vs_last <= 1.5,
    );
    console.log(
      `\narchive bytes fetched for the first page: file store cold ${fmt(archivedPage.coldBytes)}, warm ${fmt(archivedPage.warmBytes)}; ` +
        `moto S3 cold ${fmt(s3Page.coldBytes)}, warm ${fmt(s3Page.warmBytes)}`,
    );
    console.log("\nexports (each in its own process; tsx, then the esbuild bundle):");
    for (const [rows, e] of [...exports, ...bundled]) {
      console.log(
        `  ${fmt(rows).padStart(10)} rows  ${e.seconds.toFixed(1).padStart(6)} s  ${fmt(rows / e.seconds).padStart(9)} rows/s  ` +
          `CPU ${e.cpuSeconds.toFixed(1)} s  payload ${fmt(e.bytes / 2 ** 20)} MiB  maxRSS ${fmt(e.maxRssMb)} MB (sampled ${fmt(e.sampledPeakRssMb)})`,
      );
    }
    console.log(
      `\nexport breakdown, ${fmt(plan.ratioRows)} rows, stage by stage (not overlapped):`,
    );
    for (const [name, stage] of Object.entries(breakdown)) {
      if (name === "rows") continue;
      console.log(
        `  ${name.padEnd(20)} ${stage.seconds.toFixed(2).padStart(6)} s  CPU ${(stage.cpuSeconds ?? 0).toFixed(2).padStart(5)} s  ${fmt(plan.ratioRows / stage.seconds).padStart(10)} rows/s  ${stage.note}`,
      );
    }
    console.log(`\ndiscovery plan (index used: ${disc.usesIndex}):\n${disc.plan}`);
    console.log(`\nwrote ${file}; total ${((performance.now() - started) / 1000).toFixed(0)} s`);
  });
}

const childIndex = process.argv.indexOf("--child");
if (childIndex >= 0) {
  const kind = process.argv[childIndex + 1];
  const args = JSON.parse(process.argv[childIndex + 2] ?? "{}") as ExportArgs;
  const result = kind === "export" ? await exportChild(args) : await breakdownChild(args);
  console.log(JSON.stringify(result));
} else {
  await main();
}
