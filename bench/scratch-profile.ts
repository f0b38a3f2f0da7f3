import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { encodePayload, writePayloadFile } from "../src/archive/payload-writer.js";
import { fileByteSource, inspectPayload } from "../src/archive/payload-reader.js";
import { parseRfc3339Micros } from "../src/domain/time.js";
import type { BucketRow } from "../src/ports/hot-store.js";

const ROWS = Number(process.argv[2] ?? 200000);
function pages(): BucketRow[][] {
  const pool = new Uint8Array(4 << 20);
  let x = 0x2545f491;
  for (let i = 0; i < pool.length; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; pool[i] = x & 0xff; }
  const start = parseRfc3339Micros("2024-01-01T00:00:00Z");
  const out: BucketRow[][] = [];
  for (let first = 0; first < ROWS; first += 5000) {
    const page: BucketRow[] = [];
    for (let i = first; i < Math.min(ROWS, first + 5000); i++) {
      const sortKey = Buffer.allocUnsafe(8); sortKey.writeBigUInt64BE(BigInt(i));
      const offset = (i * 7919) % (pool.length - 200);
      page.push({ eventTime: start + BigInt(i) * 1000n, sortKey, value: pool.slice(offset, offset + 200) });
    }
    out.push(page);
  }
  return out;
}
const all = pages();
async function* it() { for (const p of all) yield p; }
const dir = await mkdtemp(path.join(os.tmpdir(), "prof-"));
let t = performance.now();
let n = 0;
for await (const c of encodePayload("parquet", Buffer.from("p"), it())) n += c.byteLength;
console.log("encode only", (performance.now() - t).toFixed(0), "ms", n);
t = performance.now();
const w = await writePayloadFile("parquet", Buffer.from("p"), it(), path.join(dir, "a.parquet"));
console.log("writePayloadFile", (performance.now() - t).toFixed(0), "ms");
t = performance.now();
const src = await fileByteSource(w.filePath);
const c = await inspectPayload(src, "parquet", {});
console.log("inspect", (performance.now() - t).toFixed(0), "ms", c.rowCount, c.rowsDigest === w.rowsDigest);
console.log("rss", process.resourceUsage().maxRSS / 1024);
await rm(dir, { recursive: true });
