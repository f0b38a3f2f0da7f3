import { randomBytes } from "node:crypto";
import { encodePayload, writePayloadFile } from "../src/archive/payload-writer.js";
import { fileByteSource, inspectPayload } from "../src/archive/payload-reader.js";
import { rm } from "node:fs/promises";
const N = Number(process.argv[2] ?? 1_000_000);
const POOL = randomBytes(1 << 20);
const pages: any[][] = [];
let page: any[] = [];
const start = 1704153600000000n;
for (let i = 0; i < N; i++) {
  const sk = Buffer.allocUnsafe(8); sk.writeBigInt64BE(BigInt(i));
  const off = (i * 7919) % (POOL.length - 200);
  page.push({ eventTime: start + BigInt(i) * 8000n + BigInt(i % 997), sortKey: sk, value: POOL.subarray(off, off + 200) });
  if (page.length === 5000) { pages.push(page); page = []; }
}
if (page.length) pages.push(page);
async function* src() { yield* pages; }
const mode = process.argv[3] ?? "encode";
let t = performance.now();
if (mode === "encode") {
  let bytes = 0;
  for await (const c of encodePayload("parquet", Buffer.from("tenant-0001"), src())) bytes += c.byteLength;
  console.log("encode", (performance.now() - t) / 1000, bytes);
} else {
  await rm("/tmp/prof/x.parquet", { force: true });
  const w = await writePayloadFile("parquet", Buffer.from("tenant-0001"), src(), "/tmp/prof/x.parquet");
  console.log("write", (performance.now() - t) / 1000, w.byteLength, w.sha256);
  t = performance.now();
  const s = await fileByteSource("/tmp/prof/x.parquet");
  const c = await inspectPayload(s, "parquet", {});
  await s.close();
  console.log("inspect", (performance.now() - t) / 1000, c.rowCount, c.rowsDigest === w.rowsDigest);
}
console.log("rss", process.resourceUsage().maxRSS / 1024);
