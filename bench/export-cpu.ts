/**
 * The export's CPU alone: `npx tsx bench/export-cpu.ts [--rows N] [--runs K]
 * [--prof DIR] [--breakdown] [--threads]`. Seeds K buckets of N rows (default 1M, 3),
 * exports each from the worker's esbuild bundle in a child process of its
 * own (as `npm run bench` does for `export_cpu_s_per_million_rows`) and
 * prints each run's CPU seconds per 1M rows with the load average. `--prof`
 * runs the children under `node --cpu-prof` into DIR; `--breakdown` then
 * runs the per-stage breakdown (wall and CPU seconds per stage), also
 * bundled, once per run on that run's bucket, and prints each stage's
 * median. `--baseline DIR` bundles DIR's export and breakdown children too
 * (another checkout, e.g. `git archive main` unpacked) and alternates the
 * two, baseline first, so a load that drifts weighs on both alike.
 * `--threads` prints each export's CPU by thread (Linux: the main thread,
 * the check thread, libuv's pool, V8's helpers), sampled every 50 ms. Not part
 * of `npm run bench`: a tool for measuring one change against another on a
 * shared machine.
 */
import { execFile } from "node:child_process";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bundleExportChild, type ExportArgs, type ExportResult } from "./export-child.js";
import type { Breakdown } from "./breakdown-child.js";
import { RECORDS_TABLE } from "../src/adapters/sql/migrations.js";
import {
  EXPORT_TABLE,
  freshExportTable,
  median,
  progressLog,
  seedBucket,
  withBenchSession,
  commandOption,
  loadAverages,
} from "./support.js";

const FIRST_BUCKET = 300;

async function runBundled<T>(
  bundle: string,
  flag: string,
  args: ExportArgs,
  nodeFlags: string[],
): Promise<T> {
  return await new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [...nodeFlags, bundle, flag, JSON.stringify(args)],
      { encoding: "utf8", maxBuffer: 16 << 20, env: process.env },
      (error, stdout) => {
        if (error) return reject(error);
        const lines = stdout.trim().split("\n");
        const last = lines.pop() ?? "";
        // --trace-gc and the like print to stdout before the result.
        if (lines.length > 0) process.stderr.write(`${lines.join("\n")}\n`);
        resolve(JSON.parse(last) as T);
      },
    );
    child.stderr?.pipe(process.stderr);
  });
}

const rows = Number(commandOption("--rows") ?? 1_000_000);
const runs = Number(commandOption("--runs") ?? 3);
const profDir = commandOption("--prof");
const started = performance.now();
const log = progressLog(started);

await withBenchSession(
  { workPrefix: "pulpitum-export-cpu-", connections: 4, log },
  async ({ databaseUrl, db, store, work }) => {
    await freshExportTable(db, store);
    const kinds = process.argv.includes("--baseline") ? 2 : 1;
    for (let i = 0; i < runs * kinds; i++) await seedBucket(store, FIRST_BUCKET + i, rows);
    await db.query(`VACUUM ANALYZE ${RECORDS_TABLE}`);
    log(`seeded ${runs * kinds} × ${rows} rows of ${EXPORT_TABLE}`);
    const bundle = await bundleExportChild(work, undefined, profDir === undefined);
    const storeRoot = path.join(work, "store");
    const nodeFlags = profDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${profDir}`];
    if (process.argv.includes("--trace-gc")) nodeFlags.push("--trace-gc");
    const baselineDir = commandOption("--baseline");
    const variants: { name: string; bundle: string }[] = [];
    if (baselineDir !== undefined) {
      const entry = path.join(path.resolve(baselineDir), "bench", "export-child.ts");
      const dir = path.join(work, "baseline");
      await mkdir(dir);
      variants.push({
        name: "baseline",
        bundle: await bundleExportChild(dir, entry, profDir === undefined),
      });
    }
    variants.push({ name: "this", bundle });
    const cpu = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    /** Each run, each variant in turn (baseline first) on a bucket of its own, through `flag`'s child. */
    const alternate = async <T>(
      list: readonly { name: string; bundle: string }[],
      flag: string,
      flags: string[],
      each: (variant: { name: string }, i: number, result: T, before: string) => void,
    ) => {
      for (let i = 0; i < runs; i++) {
        for (const [v, variant] of list.entries()) {
          const before = loadAverages();
          const args = {
            threads: process.argv.includes("--threads"),
            databaseUrl,
            bucketIndex: FIRST_BUCKET + i * list.length + v,
            storeRoot,
            tempDir: work,
          };
          each(variant, i, await runBundled<T>(variant.bundle, flag, args, flags), before);
        }
      }
    };
    await alternate<ExportResult>(
      variants,
      "--export-child",
      nodeFlags,
      (variant, i, result, before) => {
        const perMillion = (result.cpuSeconds / result.rows) * 1e6;
        cpu.get(variant.name)!.push(perMillion);
        console.log(
          `${variant.name} export ${i + 1}: ${result.rows} rows, ${result.bytes} bytes, ${result.seconds.toFixed(2)} s wall, ` +
            `CPU ${result.cpuSeconds.toFixed(2)} s = ${perMillion.toFixed(2)} core-s per 1M rows, ` +
            `maxRSS ${result.maxRssMb.toFixed(0)} MB; load ${before} -> ${loadAverages()}` +
            (result.cpuByThread === undefined
              ? ""
              : `; by thread: ${Object.entries(result.cpuByThread)
                  .sort((a, b) => b[1] - a[1])
                  .map(([name, s]) => `${name} ${s.toFixed(2)}`)
                  .join(", ")}`),
        );
      },
    );
    for (const [name, values] of cpu)
      console.log(
        `${name}: median CPU per 1M rows ${median(values).toFixed(2)} (${values.map((c) => c.toFixed(2)).join(", ")})`,
      );
    if (process.argv.includes("--breakdown")) {
      // One breakdown per run and variant, on that run's exported bucket,
      // alternating like the exports; each stage's median is printed.
      const breakdowns: { name: string; bundle: string }[] = [];
      for (const variant of variants) {
        const dir = variant.name === "this" ? work : path.join(work, "baseline");
        const entry =
          variant.name === "this"
            ? fileURLToPath(new URL("./breakdown-child.ts", import.meta.url))
            : path.join(path.resolve(baselineDir!), "bench", "breakdown-child.ts");
        breakdowns.push({ name: variant.name, bundle: await bundleExportChild(dir, entry) });
      }
      const stages = new Map<string, Map<string, { wall: number[]; cpu: number[]; note: string }>>(
        breakdowns.map((b) => [b.name, new Map()]),
      );
      await alternate<Breakdown>(
        breakdowns,
        "--breakdown-child",
        [],
        (variant, i, result, before) => {
          const line: string[] = [];
          for (const [name, stage] of Object.entries(result)) {
            if (name === "rows") continue;
            const s = stages.get(variant.name)!;
            const seen = s.get(name) ?? { wall: [], cpu: [], note: stage.note };
            seen.wall.push(stage.seconds);
            seen.cpu.push(stage.cpuSeconds ?? 0);
            s.set(name, seen);
            line.push(`${name} ${(stage.cpuSeconds ?? 0).toFixed(2)}`);
          }
          console.log(
            `${variant.name} breakdown ${i + 1} (CPU s): ${line.join(", ")}; load ${before} -> ${loadAverages()}`,
          );
        },
      );
      for (const [name, byStage] of stages) {
        console.log(`${name} breakdown (bundled), medians of ${runs}:`);
        for (const [stage, { wall, cpu: cpuSeconds, note }] of byStage)
          console.log(
            `  ${stage.padEnd(20)} ${median(wall).toFixed(2).padStart(6)} s wall  ` +
              `${median(cpuSeconds).toFixed(2).padStart(6)} s CPU  ${note}`,
          );
      }
    }
  },
);
