/**
 * The segmented-export bench's child process, run from the worker's esbuild
 * bundle under plain node (see {@link bundleExportChild}): claim (untimed),
 * then the export phase through runNextPhase, timed, with the segment bounds
 * it is given. While it runs it samples its own RSS and the size of every
 * file under its staging folder (`tempDir`, where export stages each part),
 * so both peaks belong to this export alone.
 */
import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { runNextPhase } from "../src/usecases/run-next-phase.js";
import { benchContext, exportBucketId, SNAPSHOT_PAGE_SIZE } from "./support.js";

export interface SegmentedArgs {
  readonly databaseUrl: string;
  readonly bucketIndex: number;
  readonly storeRoot: string;
  /** The export's temporary folder, used by nothing else: its size is the staged bytes. */
  readonly stagingDir: string;
  readonly segmentRows: number;
  readonly segmentBytes: number;
}

export interface SegmentedResult {
  readonly rows: number;
  readonly bytes: number;
  readonly parts: number;
  /** runNextPhase calls of the export phase (one: no deadline is set). */
  readonly invocations: number;
  readonly seconds: number;
  readonly maxRssMb: number;
  readonly sampledPeakRssMb: number;
  /** Peak total size of the staging folder's files, sampled every 20 ms. */
  readonly sampledPeakStagedMb: number;
  /** The largest part's payload: staged whole before its upload, so a floor of the peak. */
  readonly largestPartMb: number;
}

const MB = 2 ** 20;

/** Total bytes of the files under `dir`; files that vanish while listed count as gone. */
async function stagedBytes(dir: string): Promise<number> {
  let total = 0;
  let entries;
  try {
    entries = await readdir(dir, { recursive: true, withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    try {
      total += (await stat(path.join(entry.parentPath, entry.name))).size;
    } catch {
      // removed between the listing and the stat
    }
  }
  return total;
}

export async function segmentedChild(args: SegmentedArgs): Promise<SegmentedResult> {
  const base = benchContext(args.databaseUrl, args.storeRoot, SNAPSHOT_PAGE_SIZE, args.stagingDir);
  const ctx = {
    ...base,
    settings: { ...base.settings, segmentRows: args.segmentRows, segmentBytes: args.segmentBytes },
  };
  const id = exportBucketId(args.bucketIndex);
  try {
    const claim = await runNextPhase(ctx, id);
    if (claim.phase !== "claim" || claim.result !== "advanced")
      throw new Error(`claim did not advance: ${JSON.stringify(claim)}`);

    let peakRss = process.memoryUsage().rss;
    let peakStaged = 0;
    let sampling = false;
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      if (sampling) return;
      sampling = true;
      void stagedBytes(args.stagingDir).then((bytes) => {
        peakStaged = Math.max(peakStaged, bytes);
        sampling = false;
      });
    }, 20);
    const started = performance.now();
    let rows = 0;
    let bytes = 0;
    let invocations = 0;
    for (let next: string | null = "export"; next === "export";) {
      const outcome = await runNextPhase(ctx, id);
      invocations++;
      if (outcome.phase !== "export" || outcome.result !== "advanced")
        throw new Error(`export did not advance: ${JSON.stringify(outcome)}`);
      rows += outcome.rows ?? 0;
      bytes += outcome.bytes ?? 0;
      next = outcome.next;
    }
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);

    const recorded = await ctx.hotStore.listParts(id);
    // A one-part bucket keeps its payload on the metadata row, not as a part record.
    const largestPart =
      recorded.length > 0 ? Math.max(...recorded.map((p) => p.byteLength)) : bytes;
    return {
      rows,
      bytes,
      parts: Math.max(1, recorded.length),
      invocations,
      seconds,
      maxRssMb: process.resourceUsage().maxRSS / 1024,
      sampledPeakRssMb: peakRss / MB,
      sampledPeakStagedMb: peakStaged / MB,
      largestPartMb: largestPart / MB,
    };
  } finally {
    await ctx.hotStore.close();
  }
}

const childIndex = process.argv.indexOf("--segmented-child");
if (childIndex >= 0) {
  const args = JSON.parse(process.argv[childIndex + 1] ?? "{}") as SegmentedArgs;
  console.log(JSON.stringify(await segmentedChild(args)));
}
