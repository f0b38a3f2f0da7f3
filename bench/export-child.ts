/**
 * The export bench's child process: claim (untimed), then the export phase
 * through runNextPhase, timed, with its peak RSS. It imports only what an
 * export needs, and runs either under tsx (`bench/run.ts --child export`) or
 * bundled by esbuild the way the worker Lambda is bundled
 * ({@link bundleExportChild}), so its memory can be measured both ways.
 */
import { payloadCheckPlace, type CheckPlace } from "../src/archive/payload-check.js";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { BuildOptions } from "esbuild";
import { runNextPhase } from "../src/usecases/run-next-phase.js";
import { ESM_BANNER } from "../infra/esm-banner.js";
import {
  PAYLOAD_CHECK_WORKER_BUNDLE,
  PAYLOAD_CHECK_WORKER_SOURCE,
} from "../infra/worker-entries.js";
import { benchContext, exportBucketId, SNAPSHOT_PAGE_SIZE } from "./support.js";

export interface ExportArgs {
  readonly databaseUrl: string;
  readonly bucketIndex: number;
  /** More buckets exported at the same time in this process, as a worker runs a batch's messages. */
  readonly concurrentBucketIndexes?: readonly number[];
  readonly storeRoot: string;
  readonly tempDir: string;
  /** Rows per snapshot page, when not the default ({@link SNAPSHOT_PAGE_SIZE}). */
  readonly snapshotPageSize?: number;
  /** Sample each thread's CPU every 50 ms (Linux), for {@link ExportResult.cpuByThread}. */
  readonly threads?: boolean;
}

export interface ExportResult {
  readonly rows: number;
  readonly bytes: number;
  readonly seconds: number;
  /** This process's user + system CPU over the timed export (the thread pool's included). */
  readonly cpuSeconds: number;
  readonly maxRssMb: number;
  readonly sampledPeakRssMb: number;
  /** Peaks of the V8 heap in use and of memory outside it (Buffers, Arrow, WebAssembly). */
  readonly sampledPeakHeapMb: number;
  readonly sampledPeakExternalMb: number;
  /** Where this process checks payloads: the check thread, or the main thread when its module is missing. */
  readonly checkedOn: CheckPlace;
  /**
   * With `threads`: CPU seconds over the export by thread, keyed by its name
   * and id ("main", "node" for the check thread and V8's helpers alike,
   * "libuv-worker" for the pool), as last sampled; a thread that ended
   * between samples loses up to 50 ms.
   */
  readonly cpuByThread?: Record<string, number>;
}

/** Each thread's name and user + system CPU seconds so far (Linux), by thread id. */
function threadTimes(): Map<string, { name: string; seconds: number }> {
  const out = new Map<string, { name: string; seconds: number }>();
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
      const name =
        tid === String(process.pid)
          ? "main"
          : stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(tid, { name, seconds: (Number(fields[11]) + Number(fields[12])) / 100 });
    } catch {
      // The thread ended since the listing.
    }
  }
  return out;
}

/**
 * Claim (untimed), then the export phase through runNextPhase, timed, with
 * its peak RSS; with `concurrentBucketIndexes`, every bucket's export at once.
 */
export async function exportChild(args: ExportArgs): Promise<ExportResult> {
  const ctx = benchContext(
    args.databaseUrl,
    args.storeRoot,
    args.snapshotPageSize ?? SNAPSHOT_PAGE_SIZE,
    args.tempDir,
  );
  try {
    const ids = [args.bucketIndex, ...(args.concurrentBucketIndexes ?? [])].map(exportBucketId);
    for (const id of ids) {
      const claim = await runNextPhase(ctx, id);
      if (claim.phase !== "claim" || claim.result !== "advanced")
        throw new Error(`claim did not advance: ${JSON.stringify(claim)}`);
    }
    const peak = { rss: 0, heapUsed: 0, external: 0, arrayBuffers: 0 };
    const sample = () => {
      const m = process.memoryUsage();
      for (const k of Object.keys(peak) as (keyof typeof peak)[]) peak[k] = Math.max(peak[k], m[k]);
    };
    sample();
    const sampler = setInterval(sample, 25);
    const before = args.threads === true ? threadTimes() : undefined;
    const lastSeen = new Map<string, { name: string; seconds: number }>();
    const threadSampler =
      before === undefined
        ? undefined
        : setInterval(() => {
            for (const [tid, t] of threadTimes()) lastSeen.set(tid, t);
          }, 50);
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    const outcomes = await Promise.all(ids.map((id) => runNextPhase(ctx, id)));
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    clearInterval(sampler);
    clearInterval(threadSampler);
    let cpuByThread: Record<string, number> | undefined;
    if (before !== undefined) {
      for (const [tid, t] of threadTimes()) lastSeen.set(tid, t);
      cpuByThread = {};
      for (const [tid, t] of lastSeen) {
        const spent = t.seconds - (before.get(tid)?.seconds ?? 0);
        if (spent > 0) cpuByThread[`${t.name} ${tid}`] = spent;
      }
    }
    for (const outcome of outcomes) {
      if (outcome.phase !== "export" || outcome.result !== "advanced")
        throw new Error(`export did not advance: ${JSON.stringify(outcome)}`);
    }
    return {
      rows: outcomes.reduce((sum, o) => sum + (o.rows ?? 0), 0),
      bytes: outcomes.reduce((sum, o) => sum + (o.bytes ?? 0), 0),
      seconds,
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      maxRssMb: process.resourceUsage().maxRSS / 1024,
      checkedOn: payloadCheckPlace(),
      sampledPeakRssMb: peak.rss / 2 ** 20,
      sampledPeakHeapMb: peak.heapUsed / 2 ** 20,
      sampledPeakExternalMb: peak.external / 2 ** 20,
      cpuByThread,
    };
  } finally {
    await ctx.hotStore.close();
  }
}

/**
 * Bundle this file (or another bench child, `entry`) into `dir` with the
 * esbuild options infra uses for the worker (ESM, minified), and beside it
 * the worker-thread entry the export spawns next to its own module
 * (infra/worker-entries.ts), taken from the same checkout as `entry`;
 * returns the bundle's path.
 */
export async function bundleExportChild(
  dir: string,
  entry: string = fileURLToPath(import.meta.url),
  /** False for a readable CPU profile (bench/export-cpu.ts --prof). */
  minify = true,
): Promise<string> {
  const { build } = await import("esbuild");
  const options = {
    bundle: true,
    platform: "node",
    format: "esm",
    target: `node${process.versions.node.split(".")[0]}`,
    mainFields: ["module", "main"],
    banner: { js: ESM_BANNER },
    minify,
    keepNames: true,
    external: ["pg-native", "esbuild"],
    logLevel: "warning",
  } as const satisfies BuildOptions;
  const outfile = path.join(dir, `${path.basename(entry, ".ts")}.mjs`);
  await build({ ...options, entryPoints: [entry], outfile });
  // Bench children live in <checkout>/bench/. A baseline checkout from
  // before the worker existed has no entry to bundle and spawns none.
  const checkout = path.resolve(path.dirname(entry), "..");
  const workerSource = path.join(checkout, PAYLOAD_CHECK_WORKER_SOURCE);
  if (checkout === path.resolve(import.meta.dirname, "..") || existsSync(workerSource)) {
    const workerFile = path.join(dir, PAYLOAD_CHECK_WORKER_BUNDLE);
    await build({ ...options, entryPoints: [workerSource], outfile: workerFile });
  }
  return outfile;
}

const childIndex = process.argv.indexOf("--export-child");
if (childIndex >= 0) {
  const args = JSON.parse(process.argv[childIndex + 1] ?? "{}") as ExportArgs;
  console.log(JSON.stringify(await exportChild(args)));
}
