/**
 * Encode (native writer) and verify (verify-columns) 1M bench-shaped rows in
 * one process, CPU seconds per stage: `npx tsx bench/verify-cpu.ts [rows] [file]`.
 */
import { readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileByteSource } from "../src/archive/byte-sources.js";
import { inspectPayload } from "../src/archive/payload-reader.js";
import { writePayloadFile } from "../src/archive/payload-writer.js";
import { bucketExpectations } from "../src/archive/store.js";
import type { BucketRow } from "../src/ports/hot-store.js";
import {
  exportBucketId,
  exportBucketStart,
  PARTITION_KEY,
  rowTime,
  sortKeyOf,
  valueOf,
} from "./support.js";

const rows = Number(process.argv[2] ?? 1_000_000);
const file = process.argv[3] ?? path.join(os.tmpdir(), `verify-cpu-${process.pid}.parquet`);
const start = exportBucketStart(1);
async function* pages(): AsyncIterable<BucketRow[]> {
  for (let from = 0; from < rows; from += 5000) {
    const page: BucketRow[] = [];
    for (let i = from; i < Math.min(rows, from + 5000); i++)
      page.push({ eventTime: rowTime(start, i), sortKey: sortKeyOf(i), value: valueOf(i) });
    yield page;
  }
}
/** The main thread's own CPU seconds (Linux: /proc/self/task/<pid>/stat), or NaN elsewhere. */
function mainThreadCpu(): number {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}
/** CPU seconds per thread name (Linux), summed over threads of the same name. */
function threadsCpu(): Map<string, number> {
  const out = new Map<string, number>();
  try {
    for (const tid of readdirSync("/proc/self/task")) {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
      const name =
        tid === String(process.pid)
          ? "main"
          : stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(name, (out.get(name) ?? 0) + (Number(fields[11]) + Number(fields[12])) / 100);
    }
  } catch {
    // not Linux
  }
  return out;
}
const cpu = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
  const threads = threadsCpu();
  const main = mainThreadCpu();
  const c = process.cpuUsage();
  const t = performance.now();
  const result = await fn();
  const u = process.cpuUsage(c);
  console.log(
    `${name.padEnd(10)} ${((performance.now() - t) / 1000).toFixed(2)} s wall ${((u.user + u.system) / 1e6).toFixed(2)} s CPU ` +
      `(main thread ${(mainThreadCpu() - main).toFixed(2)}); load ${os.loadavg()[0]!.toFixed(1)}; ` +
      [...threadsCpu()]
        .map(([n, c]) => [n, c - (threads.get(n) ?? 0)] as const)
        .filter(([, c]) => c > 0)
        .map(([n, c]) => `${n} ${c.toFixed(2)}`)
        .join(", "),
  );
  return result;
};
await cpu("rows only", async () => {
  let n = 0;
  for await (const page of pages()) n += page.length;
  return n;
});
await rm(file, { force: true });
const written = await cpu("write", () => writePayloadFile("parquet", PARTITION_KEY, pages(), file));
for (let r = 0; r < 2; r++)
  await cpu("verify", async () => {
    const source = await fileByteSource(file);
    try {
      const content = await inspectPayload(
        source,
        "parquet",
        bucketExpectations(exportBucketId(1)),
      );
      if (content.rowsDigest !== written.rowsDigest) throw new Error("digest differs");
    } finally {
      await source.close();
    }
  });
console.log(`bytes ${written.byteLength}`);
await rm(file, { force: true });
