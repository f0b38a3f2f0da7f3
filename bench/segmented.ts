/**
 * Issue 15's segmented-export bench: one bucket exported in parts by the
 * worker's esbuild bundle under plain node, against the single-part export
 * of an identical bucket in the same run.
 *
 *   npx tsx bench/segmented.ts           # 10M rows, the default bounds (1M rows, 256 MiB a part)
 *   npx tsx bench/segmented.ts --quick   # 1M rows in parts of 250,000
 *
 * `npm run bench` runs the same measurement ({@link segmentedExports}) and
 * adds its keys to bench/results.json; run alone it starts a throwaway
 * PostgreSQL unless DATABASE_URL is set, prints the figures and writes
 * bench/segmented.json. Figures are printed and recorded, never asserted.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_SEGMENT_BYTES, DEFAULT_SEGMENT_ROWS } from "../src/config/config.js";
import { RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import type { SqlHotStore } from "../src/adapters/sql/sql-hot-store.js";
import { bundleExportChild } from "./export-child.js";
import type { SegmentedArgs, SegmentedResult } from "./segmented-child.js";
import {
  freshExportTable,
  progressLog,
  runChild,
  seedBucket,
  withBenchSession,
} from "./support.js";

/** Day index of the first of the four identical buckets (clear of run.ts's 1–34). */
const FIRST_BUCKET = 50;
/**
 * Which export each bucket gets, in run order: A B B A, so a load that rises
 * or falls through the run weighs on both kinds alike (this machine is shared).
 */
const ORDER = ["segmented", "single", "single", "segmented"] as const;
const MB = 2 ** 20;

export interface SegmentedPlan {
  readonly rows: number;
  readonly segmentRows: number;
  readonly segmentBytes: number;
}

export function segmentedPlan(quick: boolean): SegmentedPlan {
  return quick
    ? { rows: 1_000_000, segmentRows: 250_000, segmentBytes: DEFAULT_SEGMENT_BYTES }
    : { rows: 10_000_000, segmentRows: DEFAULT_SEGMENT_ROWS, segmentBytes: DEFAULT_SEGMENT_BYTES };
}

/** The keys this bench adds to bench/results.json. */
export interface SegmentedFigures {
  readonly segmented_export_peak_rss_mb: number;
  readonly segmented_export_peak_tmp_mb: number;
  readonly segmented_export_rows_per_s: number;
  readonly single_part_export_rows_per_s: number;
  readonly segmented_vs_single_export_ratio: number;
  readonly segmented_export: {
    readonly rows: number;
    readonly segment_rows: number;
    readonly segment_bytes: number;
    readonly segmented: readonly SegmentedResult[];
    readonly single_part: readonly SegmentedResult[];
  };
}

/**
 * Seed four identical buckets of `plan.rows` rows, then export two in parts
 * bounded by the plan and two as a single part (bounds above the bucket),
 * in the order of {@link ORDER}, each in a bundled child process with a
 * staging folder of its own. Rates are total rows over total seconds of
 * each kind; peaks are the highest of each kind.
 */
export async function segmentedExports(
  store: SqlHotStore,
  databaseUrl: string,
  work: string,
  plan: SegmentedPlan,
  log: (message: string) => void,
): Promise<SegmentedFigures> {
  const fmt = (n: number) => n.toLocaleString("en-US", { maximumFractionDigits: 0 });
  for (const index of ORDER.map((_, i) => FIRST_BUCKET + i)) {
    await seedBucket(store, index, plan.rows, (done) =>
      log(`seeded ${fmt(done)} / ${fmt(plan.rows)} rows (bucket ${index})`),
    );
  }
  // Hint bits set and autovacuum satisfied now, so neither lands on whichever export runs first.
  log("VACUUM of the records table");
  await store.db.query(`VACUUM ${RECORDS_TABLE}`);
  const dir = await mkdtemp(path.join(work, "segmented-"));
  const bundle = await bundleExportChild(
    dir,
    fileURLToPath(new URL("./segmented-child.ts", import.meta.url)),
  );
  const storeRoot = path.join(dir, "store");
  const run = async (bucketIndex: number, segmentRows: number, segmentBytes: number) => {
    const stagingDir = path.join(dir, `staging-${bucketIndex}`);
    await mkdir(stagingDir);
    const result = await runChild<SegmentedResult>(
      "segmented",
      {
        databaseUrl,
        bucketIndex,
        storeRoot,
        stagingDir,
        segmentRows,
        segmentBytes,
      } satisfies SegmentedArgs,
      bundle,
    );
    if (result.rows !== plan.rows)
      throw new Error(`export wrote ${result.rows} rows, expected ${plan.rows}`);
    // The next export needs the disk more than anyone needs these objects.
    await rm(storeRoot, { recursive: true, force: true });
    return result;
  };
  const results = { segmented: [] as SegmentedResult[], single: [] as SegmentedResult[] };
  for (const [i, kind] of ORDER.entries()) {
    log(
      kind === "segmented"
        ? `export of ${fmt(plan.rows)} rows in parts of ${fmt(plan.segmentRows)} rows / ${fmt(plan.segmentBytes / MB)} MiB (bundled child)`
        : `export of an identical ${fmt(plan.rows)}-row bucket as one part (bundled child)`,
    );
    results[kind].push(
      kind === "segmented"
        ? await run(FIRST_BUCKET + i, plan.segmentRows, plan.segmentBytes)
        : await run(FIRST_BUCKET + i, plan.rows, Number.MAX_SAFE_INTEGER),
    );
  }
  const { segmented, single } = results;
  await rm(dir, { recursive: true, force: true });
  const rate = (rs: readonly SegmentedResult[]) =>
    (plan.rows * rs.length) / rs.reduce((sum, r) => sum + r.seconds, 0);
  const segmentedRate = rate(segmented);
  const singleRate = rate(single);
  return {
    segmented_export_peak_rss_mb: Math.max(...segmented.map((r) => r.maxRssMb)),
    segmented_export_peak_tmp_mb: Math.max(
      ...segmented.map((r) => Math.max(r.sampledPeakStagedMb, r.largestPartMb)),
    ),
    segmented_export_rows_per_s: segmentedRate,
    single_part_export_rows_per_s: singleRate,
    segmented_vs_single_export_ratio: segmentedRate / singleRate,
    segmented_export: {
      rows: plan.rows,
      segment_rows: plan.segmentRows,
      segment_bytes: plan.segmentBytes,
      segmented,
      single_part: single,
    },
  };
}

/** Goal rows for bench/run.ts's table (and this file's own output). */
export function segmentedLines(
  f: SegmentedFigures,
  line: (goal: string, measured: string, target: string, met: boolean | "info") => void,
): void {
  const fmt = (n: number) => n.toLocaleString("en-US", { maximumFractionDigits: 0 });
  const s = f.segmented_export;
  const boundMb = s.segment_bytes / MB;
  line(
    `segmented export, bundle, peak RSS`,
    `${fmt(f.segmented_export_peak_rss_mb)} MB (${fmt(s.rows)} rows, ${s.segmented[0]!.parts} parts)`,
    "<= 256 MB",
    f.segmented_export_peak_rss_mb <= 256,
  );
  line(
    "segmented export, peak staged (local disk)",
    `${f.segmented_export_peak_tmp_mb.toFixed(1)} MiB`,
    `<= ${fmt(boundMb)} MiB`,
    f.segmented_export_peak_tmp_mb <= boundMb,
  );
  line(
    "segmented vs one-part export, same rows",
    `${fmt(f.segmented_export_rows_per_s)} / ${fmt(f.single_part_export_rows_per_s)} rows/s = ${f.segmented_vs_single_export_ratio.toFixed(2)}`,
    ">= 0.9",
    f.segmented_vs_single_export_ratio >= 0.9,
  );
  line(
    "one-part export, peak RSS / staged",
    `${fmt(Math.max(...s.single_part.map((r) => r.maxRssMb)))} MB / ${fmt(Math.max(...s.single_part.map((r) => r.sampledPeakStagedMb)))} MiB`,
    "(info)",
    "info",
  );
}

async function main(): Promise<void> {
  const quick = process.argv.includes("--quick");
  const plan = segmentedPlan(quick);
  const started = performance.now();
  const log = progressLog(started);
  const session = { workPrefix: "pulpitum-segmented-", connections: 2, log };
  await withBenchSession(session, async ({ databaseUrl, db, store, work }) => {
    await freshExportTable(db, store);
    const figures = await segmentedExports(store, databaseUrl, work, plan, log);
    const results = {
      mode: quick ? "quick" : "full",
      measured_at: new Date().toISOString(),
      ...figures,
      load_average: os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(" "),
      machine: { cpu: os.cpus()[0]?.model ?? "?", cpus: os.cpus().length, node: process.version },
    };
    const file = fileURLToPath(new URL("./segmented.json", import.meta.url));
    await writeFile(file, `${JSON.stringify(results, null, 2)}\n`);
    const line = (goal: string, measured: string, target: string, met: boolean | "info") =>
      console.log(
        `${goal.padEnd(44)} ${measured.padStart(30)}  ${target.padEnd(12)} ${met === "info" ? "" : met ? "met" : "NOT MET"}`,
      );
    segmentedLines(figures, line);
    console.log(`\nwrote ${file}; total ${((performance.now() - started) / 1000).toFixed(0)} s`);
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
