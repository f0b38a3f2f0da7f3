/**
 * The Parquet writers side by side on the same rows (issue 31):
 *
 *   npx tsx bench/writers.ts [rows] [repeats]   # default 1,000,000 rows, 2 rounds
 *
 * Each measurement runs in a child process of its own (peak RSS is then that
 * writer's): `rows` bench-shaped rows (8-byte sort key, 200-byte value whose
 * first 32 bytes are unique, event times 8 ms apart) in pages of the
 * snapshot's size, through encodeParquet with the export's row guard (order
 * check and row digest), bytes counted, not stored. A `rows-only` child
 * makes the same pages without encoding them; its CPU is subtracted so the
 * figures are the writer's alone. Rounds alternate the writers so a load
 * that drifts weighs on each alike. Prints a table and JSON.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { encodeParquet } from "../src/archive/parquet/encode.js";
import { RowStreamGuard } from "../src/archive/row-guard.js";
import type { BucketRow } from "../src/ports/hot-store.js";
import { median, PARTITION_KEY, SNAPSHOT_PAGE_SIZE, VALUE_BYTES } from "./support.js";

/**
 * The writers measured. parquet-wasm was the second one until issue 31
 * removed it (its figures, measured with this script at 78e0288, are in
 * bench/README.md); a candidate writer is added here as another mode.
 */
type Mode = "native" | "rows-only";

interface WriterRun {
  readonly mode: Mode;
  readonly rows: number;
  readonly bytes: number;
  readonly seconds: number;
  readonly cpuSeconds: number;
  readonly maxRssMb: number;
}

/** Deterministic values: the first 32 bytes a digest of the row number, the rest from a fixed pool. */
const POOL = (() => {
  const pool = Buffer.allocUnsafe(1 << 20);
  for (let i = 0; i < pool.length; i += 32)
    createHash("sha256").update(`pool ${i}`).digest().copy(pool, i);
  return pool;
})();

export async function* pagesOf(rows: number): AsyncIterable<BucketRow[]> {
  const start = 1_704_067_200_000_000n;
  for (let from = 0; from < rows; from += SNAPSHOT_PAGE_SIZE) {
    const page: BucketRow[] = [];
    for (let i = from; i < Math.min(rows, from + SNAPSHOT_PAGE_SIZE); i++) {
      const sortKey = Buffer.allocUnsafe(8);
      sortKey.writeBigInt64BE(BigInt(i));
      const value = Buffer.allocUnsafe(VALUE_BYTES);
      createHash("sha256").update(sortKey).digest().copy(value, 0);
      const offset = (i * 7919) % (POOL.length - VALUE_BYTES);
      POOL.copy(value, 32, offset, offset + VALUE_BYTES - 32);
      page.push({ eventTime: start + BigInt(i) * 8000n + BigInt(i % 997), sortKey, value });
    }
    yield page;
    // As a snapshot page arrives from the database: a turn of the event loop.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

async function writerChild(mode: Mode, rows: number): Promise<WriterRun> {
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  let bytes = 0;
  if (mode === "rows-only") {
    for await (const page of pagesOf(rows)) bytes += page.length;
  } else {
    const guard = new RowStreamGuard();
    for await (const chunk of encodeParquet(PARTITION_KEY, pagesOf(rows), guard, {}))
      bytes += chunk.byteLength;
    if (guard.digest.count !== rows) throw new Error(`${mode} wrote ${guard.digest.count} rows`);
  }
  const cpu = process.cpuUsage(cpuBefore);
  return {
    mode,
    rows,
    bytes,
    seconds: (performance.now() - started) / 1000,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    maxRssMb: process.resourceUsage().maxRSS / 1024,
  };
}

function runWriterChild(mode: Mode, rows: number): Promise<WriterRun> {
  const script = fileURLToPath(import.meta.url);
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ["--import", "tsx", script, "--writer-child", mode, String(rows)],
      { encoding: "utf8" },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${mode}: ${error.message} ${stderr}`));
        else resolve(JSON.parse(stdout.trim().split("\n").pop() ?? "{}") as WriterRun);
      },
    );
  });
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main(): Promise<void> {
  const rows = Number(process.argv[2] ?? 1_000_000);
  const repeats = Number(process.argv[3] ?? 2);
  const modes: Mode[] = ["rows-only", "native"];
  const runs: WriterRun[] = [];
  const load = [os.loadavg()[0]!];
  for (let round = 0; round < repeats; round++) {
    const order = round % 2 === 0 ? modes : [modes[0]!, ...modes.slice(1).reverse()];
    for (const mode of order) runs.push(await runWriterChild(mode, rows));
  }
  load.push(os.loadavg()[0]!);
  const of = (mode: Mode) => runs.filter((r) => r.mode === mode);
  const baseCpu = median(of("rows-only").map((r) => r.cpuSeconds));
  const table = (["native"] as const).map((mode) => {
    const r = of(mode);
    const cpu = median(r.map((x) => x.cpuSeconds)) - baseCpu;
    return {
      writer: mode,
      rows_per_s: rows / median(r.map((x) => x.seconds)),
      cpu_s_per_million_rows: (cpu / rows) * 1e6,
      peak_rss_mb: Math.max(...r.map((x) => x.maxRssMb)),
      bytes: r[0]!.bytes,
    };
  });
  console.log(
    `writers on ${fmt(rows)} rows, ${repeats} rounds, load average ${load.map((l) => l.toFixed(1)).join(" -> ")}; ` +
      `making the rows alone: ${((baseCpu / rows) * 1e6).toFixed(2)} CPU s per 1M (subtracted)`,
  );
  console.log("writer   rows/s (median)   CPU s / 1M rows   peak RSS MB   bytes");
  for (const t of table)
    console.log(
      `${t.writer.padEnd(8)} ${fmt(t.rows_per_s).padStart(15)}   ${t.cpu_s_per_million_rows.toFixed(2).padStart(15)}   ${fmt(t.peak_rss_mb).padStart(11)}   ${fmt(t.bytes)}`,
    );
  console.log(JSON.stringify({ rows, repeats, load, table, runs }));
}

const childIndex = process.argv.indexOf("--writer-child");
if (childIndex >= 0) {
  const result = await writerChild(
    process.argv[childIndex + 1] as Mode,
    Number(process.argv[childIndex + 2]),
  );
  console.log(JSON.stringify(result));
} else if (
  process.argv[1] !== undefined &&
  path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
) {
  await main();
}
