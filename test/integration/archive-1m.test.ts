import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryObjectStore } from "../../src/adapters/object-store/memory.js";
import { readRecordBatches } from "../../src/archive/payload-reader.js";
import { objectByteSource } from "../../src/archive/byte-sources.js";
import { RowDigest } from "../../src/archive/row-digest.js";
import { sealManifest, storePayload } from "../../src/archive/store.js";
import { verifyArchive } from "../../src/archive/verify.js";
import { parseBucketKey } from "../../src/domain/bucket.js";
import { parseTableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import type { BucketRow } from "../../src/ports/hot-store.js";

const ROWS = 1_000_000;
const VALUE_BYTES = 200;
const START = parseRfc3339Micros("2024-01-01T00:00:00Z");

let tempDir: string;
beforeAll(async () => {
  tempDir = await mkdtemp(path.join(os.tmpdir(), "archive-1m-"));
});
afterAll(async () => {
  await rm(tempDir, { recursive: true, force: true });
});

/** 1M synthetic rows in snapshot pages, generated lazily; values are slices of a random pool. */
function syntheticSnapshot(digest: RowDigest): AsyncIterable<BucketRow[]> {
  const pool = new Uint8Array(4 << 20);
  let x = 0x9e3779b9;
  for (let i = 0; i < pool.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    pool[i] = x & 0xff;
  }
  return (async function* () {
    for (let first = 0; first < ROWS; first += 1000) {
      const page: BucketRow[] = [];
      for (let i = first; i < first + 1000; i++) {
        const sortKey = Buffer.allocUnsafe(8);
        sortKey.writeBigUInt64BE(BigInt(i));
        const offset = (i * 7919) % (pool.length - VALUE_BYTES);
        const row = {
          eventTime: START + BigInt(i) * 1000n,
          sortKey,
          value: pool.slice(offset, offset + VALUE_BYTES),
        };
        digest.add(row.eventTime, row.sortKey, row.value);
        page.push(row);
      }
      yield page;
    }
  })();
}

describe.each(["parquet", "json"] as const)("a bucket of one million %s records", (format) => {
  it("stores, seals, verifies and reads back every record", async () => {
    const store = new MemoryObjectStore();
    const bucket = {
      tableId: parseTableId("bulk"),
      partitionKey: Buffer.from("tenant-42"),
      bucketKey: "year:2024",
    };
    const exported = new RowDigest();

    let started = performance.now();
    const payload = await storePayload({
      attempt: { generation: 1, ownerToken: "test-attempt" },
      store,
      prefix: "it",
      bucket,
      format,
      rows: syntheticSnapshot(exported),
      tempDir,
    });
    const storeSeconds = (performance.now() - started) / 1000;
    expect(payload.rowCount).toBe(ROWS);

    const descriptor = parseBucketKey(bucket.bucketKey);
    const manifestKey = await sealManifest({
      store,
      prefix: "it",
      bucket,
      strategy: descriptor.strategy,
      start: descriptor.start,
      end: descriptor.end,
      generation: 1,
      format,
      payload,
    });

    started = performance.now();
    const verified = await verifyArchive(store, manifestKey, {
      prefix: "it",
      bucket,
      parts: [payload],
      tempDir,
    });
    const verifySeconds = (performance.now() - started) / 1000;
    expect(verified.parts.map((p) => p.rowCount)).toEqual([ROWS]);

    started = performance.now();
    const source = await objectByteSource(store, payload.key, payload.byteLength);
    const decoded = new RowDigest();
    for await (const batch of readRecordBatches(source, format)) {
      for (const record of batch) decoded.add(record.eventTime, record.sortKey, record.value);
    }
    const readSeconds = (performance.now() - started) / 1000;
    expect(decoded.count).toBe(ROWS);
    expect(decoded.digest()).toBe(exported.digest());

    const rate = (seconds: number) => Math.round(ROWS / seconds).toLocaleString("en-US");
    console.log(
      `${format}: ${ROWS.toLocaleString("en-US")} rows, ${(payload.byteLength / 2 ** 20).toFixed(0)} MiB payload; ` +
        `store+verify ${storeSeconds.toFixed(1)} s (${rate(storeSeconds)} rows/s), ` +
        `re-verify ${verifySeconds.toFixed(1)} s (${rate(verifySeconds)} rows/s), ` +
        `read ${readSeconds.toFixed(1)} s (${rate(readSeconds)} rows/s)`,
    );
  });
});
