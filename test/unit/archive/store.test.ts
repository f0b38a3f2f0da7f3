import { readdir } from "node:fs/promises";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import {
  buildManifest,
  parseManifest,
  serializeManifest,
  sha256Hex,
} from "../../../src/archive/manifest.js";
import { sealManifest, storePayload, type ArchiveBucketRef } from "../../../src/archive/store.js";
import { verifyArchive, verifyPayload } from "../../../src/archive/verify.js";
import { readRecords } from "../../../src/archive/payload-reader.js";
import { objectByteSource } from "../../../src/archive/byte-sources.js";
import { parseBucketKey } from "../../../src/domain/bucket.js";
import { attemptTag, manifestKey } from "../../../src/domain/object-keys.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import type { BucketRow, PayloadFacts } from "../../../src/ports/hot-store.js";

const FORMATS = ["parquet", "json"] as const;
type Format = (typeof FORMATS)[number];
const PREFIX = "archive/test";
const TABLE = parseTableId("events");

let tempDir: string;
beforeEach(async () => {
  tempDir = await mkdtemp(path.join(os.tmpdir(), "archive-store-test-"));
});
afterEach(async () => {
  await rm(tempDir, { recursive: true, force: true });
});

function bucket(partition: string, bucketKey = "year:2024"): ArchiveBucketRef {
  return { tableId: TABLE, partitionKey: Buffer.from(partition), bucketKey };
}

function makeRows(count: number, startText = "2024-03-01T00:00:00Z"): BucketRow[] {
  const start = parseRfc3339Micros(startText);
  return Array.from({ length: count }, (_, i) => ({
    eventTime: start + BigInt(i) * 1_000n,
    sortKey: Buffer.from(`sk-${String(i).padStart(6, "0")}`),
    value: Buffer.from(`value ${i} `.repeat(4)),
  }));
}

async function* pages(rows: readonly BucketRow[], pageSize = 500): AsyncIterable<BucketRow[]> {
  for (let i = 0; i < rows.length; i += pageSize) yield rows.slice(i, i + pageSize);
}

async function archive(
  store: MemoryObjectStore,
  format: Format,
  ref: ArchiveBucketRef,
  rows: BucketRow[],
  generation = 1,
) {
  const payload = await storePayload({
    attempt: { generation: 1, ownerToken: "test-attempt" },
    store,
    prefix: PREFIX,
    bucket: ref,
    format,
    rows: pages(rows),
    tempDir,
  });
  const descriptor = parseBucketKey(ref.bucketKey);
  const key = await sealManifest({
    store,
    prefix: PREFIX,
    bucket: ref,
    strategy: descriptor.strategy,
    start: descriptor.start,
    end: descriptor.end,
    generation,
    format,
    payload,
  });
  return { payload, manifestKey: key };
}

/** Acknowledges every upload, then silently flips a byte in the middle of it. */
class CorruptingStore extends MemoryObjectStore {
  override async createIfAbsent(...args: Parameters<MemoryObjectStore["createIfAbsent"]>) {
    const result = await super.createIfAbsent(...args);
    const bytes = await this.get(args[0]);
    flipByte(this, bytes, args[0], Math.floor(bytes.length / 2));
    return result;
  }
}

function flipByte(store: MemoryObjectStore, bytes: Uint8Array, key: string, at: number) {
  const copy = bytes.slice();
  copy[at] = copy[at]! ^ 0x01;
  store.tamper(key, copy);
}

describe.each(FORMATS)("storing %s payloads", (format) => {
  it("stores a payload at its content address named for the export attempt and returns verified facts", async () => {
    const store = new MemoryObjectStore();
    const rows = makeRows(1200);
    const payload = await storePayload({
      attempt: { generation: 1, ownerToken: "test-attempt" },
      store,
      prefix: PREFIX,
      bucket: bucket("p"),
      format,
      rows: pages(rows),
      tempDir,
    });
    expect(payload.outcome).toBe("created");
    expect(payload.rowCount).toBe(1200);
    expect(payload.key).toBe(
      `${PREFIX}/v4/events/cA/year:2024/payloads/${payload.sha256}-g1-${attemptTag("test-attempt")}.${format}`,
    );
    const bytes = await store.get(payload.key);
    expect(bytes.byteLength).toBe(payload.byteLength);
    expect(sha256Hex(bytes)).toBe(payload.sha256);
    const decoded: TableRecord[] = [];
    for await (const r of readRecords(await objectByteSource(store, payload.key), format))
      decoded.push(r);
    expect(decoded.map((r) => r.eventTime)).toEqual(rows.map((r) => r.eventTime));
    expect(await readdir(tempDir)).toEqual([]);
  });

  it("storing the same records twice in one attempt yields one object, found and verified the second time", async () => {
    const store = new MemoryObjectStore();
    const first = await storePayload({
      attempt: { generation: 1, ownerToken: "test-attempt" },
      store,
      prefix: PREFIX,
      bucket: bucket("p"),
      format,
      rows: pages(makeRows(900), 100),
      tempDir,
    });
    const second = await storePayload({
      attempt: { generation: 1, ownerToken: "test-attempt" },
      store,
      prefix: PREFIX,
      bucket: bucket("p"),
      format,
      rows: pages(makeRows(900), 333),
      tempDir,
    });
    expect(second.outcome).toBe("already-exists");
    expect(second.key).toBe(first.key);
    expect(second.sha256).toBe(first.sha256);
    expect(store.keys()).toEqual([first.key]);
  });

  it("another attempt storing the same records writes its own object and never adopts the first", async () => {
    const store = new MemoryObjectStore();
    const input = {
      store,
      prefix: PREFIX,
      bucket: bucket("p"),
      format,
      tempDir,
    };
    const first = await storePayload({
      ...input,
      attempt: { generation: 3, ownerToken: "first-attempt" },
      rows: pages(makeRows(500)),
    });
    const second = await storePayload({
      ...input,
      attempt: { generation: 5, ownerToken: "second-attempt" },
      rows: pages(makeRows(500)),
    });
    expect([first.outcome, second.outcome]).toEqual(["created", "created"]);
    expect(second.sha256).toBe(first.sha256);
    expect(second.key).not.toBe(first.key);
    expect(store.keys().sort()).toEqual([first.key, second.key].sort());
  });

  it("an empty bucket stores, seals and verifies with zero rows", async () => {
    const store = new MemoryObjectStore();
    const { payload, manifestKey: key } = await archive(store, format, bucket("empty"), []);
    expect(payload.rowCount).toBe(0);
    const verified = await verifyArchive(store, key, {
      prefix: PREFIX,
      bucket: bucket("empty"),
    });
    expect(verified.parts.map((p) => p.rowCount)).toEqual([0]);
  });

  it("a store that corrupts the upload makes storePayload fail with an integrity error", async () => {
    const store = new CorruptingStore();
    await expect(
      storePayload({
        attempt: { generation: 1, ownerToken: "test-attempt" },
        store,
        prefix: PREFIX,
        bucket: bucket("p"),
        format,
        rows: pages(makeRows(100)),
        tempDir,
      }),
    ).rejects.toBeInstanceOf(ArchiveIntegrityError);
    expect(await readdir(tempDir)).toEqual([]);
  });

  it("a different object already at the payload key is an integrity error, not a success", async () => {
    const store = new MemoryObjectStore();
    const rows = makeRows(300);
    const payload = await storePayload({
      attempt: { generation: 1, ownerToken: "test-attempt" },
      store,
      prefix: PREFIX,
      bucket: bucket("p"),
      format,
      rows: pages(rows),
      tempDir,
    });
    const bytes = await store.get(payload.key);
    store.tamper(payload.key, bytes.subarray(0, bytes.length - 1));
    await expect(
      storePayload({
        attempt: { generation: 1, ownerToken: "test-attempt" },
        store,
        prefix: PREFIX,
        bucket: bucket("p"),
        format,
        rows: pages(rows),
        tempDir,
      }),
    ).rejects.toBeInstanceOf(ArchiveIntegrityError);
  });

  it("seals a manifest that verifies end to end, and sealing again reaches the same key", async () => {
    const store = new MemoryObjectStore();
    const ref = bucket("p");
    const { payload, manifestKey: key } = await archive(store, format, ref, makeRows(700));
    const again = await archive(store, format, ref, makeRows(700));
    expect(again.manifestKey).toBe(key);
    const verified = await verifyArchive(store, key, {
      prefix: PREFIX,
      bucket: ref,
      parts: [payload],
    });
    expect(verified.manifest.row_count).toBe(700);
    expect(verified.manifest.generation).toBe(1);
    expect(verified.parts).toEqual([
      {
        key: payload.key,
        sha256: payload.sha256,
        rowCount: 700,
        byteLength: payload.byteLength,
        first: null,
        last: null,
      },
    ]);
    // A seal after a takeover records a new generation: a second, equally valid manifest.
    const takeover = await archive(store, format, ref, makeRows(700), 2);
    expect(takeover.manifestKey).not.toBe(key);
    await verifyArchive(store, takeover.manifestKey, { bucket: ref, parts: [payload] });
  });

  it("verification catches a flipped byte and a truncation of the stored payload", async () => {
    const store = new MemoryObjectStore();
    const ref = bucket("p");
    const { payload, manifestKey: key } = await archive(store, format, ref, makeRows(500));
    const original = await store.get(payload.key);

    flipByte(store, original, payload.key, 100);
    await expect(verifyArchive(store, key, { bucket: ref })).rejects.toThrow(ArchiveIntegrityError);
    await expect(verifyPayload(store, payload, format)).rejects.toThrow(/hashes to/);

    store.tamper(payload.key, original.subarray(0, original.length - 7));
    await expect(verifyArchive(store, key, { bucket: ref })).rejects.toThrow(/bytes/);

    await store.delete(payload.key);
    await expect(verifyArchive(store, key, { bucket: ref })).rejects.toThrow(/missing/);
  });

  it("verification catches manifests swapped between two buckets", async () => {
    const store = new MemoryObjectStore();
    const a = await archive(store, format, bucket("a"), makeRows(50));
    const b = await archive(store, format, bucket("b"), makeRows(60));
    await expect(verifyArchive(store, b.manifestKey, { bucket: bucket("a") })).rejects.toThrow(
      /partition_key_b64/,
    );
    // B's manifest bytes copied into A's manifests/ folder under their own hash still name bucket B.
    const bBytes = await store.get(b.manifestKey);
    const copied = manifestKey({ prefix: PREFIX, ...bucket("a") }, sha256Hex(bBytes));
    await store.createIfAbsent(copied, bBytes);
    await expect(verifyArchive(store, copied, { bucket: bucket("a") })).rejects.toBeInstanceOf(
      ArchiveIntegrityError,
    );
    // Swapping the contents of two manifest keys breaks their content addresses.
    const aBytes = await store.get(a.manifestKey);
    store.tamper(a.manifestKey, bBytes);
    store.tamper(b.manifestKey, aBytes);
    await expect(
      verifyArchive(store, a.manifestKey, { bucket: bucket("a") }),
    ).rejects.toBeInstanceOf(ArchiveIntegrityError);
  });

  it("verification catches a manifest whose row_count disagrees with its payload", async () => {
    const store = new MemoryObjectStore();
    const ref = bucket("p");
    const { payload, manifestKey: key } = await archive(store, format, ref, makeRows(80));
    const manifest = parseManifest(await store.get(key));
    const wrong = serializeManifest({ ...manifest, row_count: 81 });
    const wrongKey = manifestKey({ prefix: PREFIX, ...ref }, sha256Hex(wrong));
    await store.createIfAbsent(wrongKey, wrong);
    await expect(verifyArchive(store, wrongKey, { bucket: ref })).rejects.toThrow(
      /decodes to 80 rows.*81/,
    );
    await expect(verifyArchive(store, wrongKey, { bucket: ref, parts: [payload] })).rejects.toThrow(
      /row_count/,
    );
  });

  it("refuses to seal a manifest for a payload that is missing or of another size", async () => {
    const store = new MemoryObjectStore();
    const ref = bucket("p");
    const { payload } = await archive(store, format, ref, makeRows(10));
    const descriptor = parseBucketKey(ref.bucketKey);
    const seal = (p: PayloadFacts) =>
      sealManifest({
        store,
        prefix: PREFIX,
        bucket: ref,
        strategy: descriptor.strategy,
        start: descriptor.start,
        end: descriptor.end,
        generation: 3,
        format,
        payload: p,
      });
    await expect(seal({ ...payload, byteLength: payload.byteLength + 1 })).rejects.toThrow(/bytes/);
    await store.delete(payload.key);
    await expect(seal(payload)).rejects.toThrow(/missing/);
  });
});

describe("storing payloads", () => {
  it("rows outside the bucket's bounds never pass verification", async () => {
    const store = new MemoryObjectStore();
    const rows = makeRows(3, "2025-01-01T00:00:00Z");
    await expect(
      storePayload({
        attempt: { generation: 1, ownerToken: "test-attempt" },
        store,
        prefix: PREFIX,
        bucket: bucket("p"),
        format: "json",
        rows: pages(rows),
        tempDir,
      }),
    ).rejects.toThrow(/outside the bucket/);
  });

  it("a 200-byte partition key gets a hashed key segment and round-trips in the manifest", async () => {
    const store = new MemoryObjectStore();
    const ref: ArchiveBucketRef = {
      tableId: TABLE,
      partitionKey: new Uint8Array(200).fill(0xff),
      bucketKey: "month:2024-03",
    };
    const { payload, manifestKey: key } = await archive(store, "parquet", ref, makeRows(20));
    expect(payload.key).toMatch(/\/events\/~[0-9a-f]{64}\/month:2024-03\/payloads\//);
    const verified = await verifyArchive(store, key, {
      prefix: PREFIX,
      bucket: ref,
      strategy: "CalendarMonthUtc",
    });
    expect(
      Buffer.from(verified.manifest.partition_key_b64, "base64").equals(
        Buffer.from(ref.partitionKey),
      ),
    ).toBe(true);
  });

  it("the manifest carries no wall-clock time: the same inputs give the same bytes", () => {
    const descriptor = parseBucketKey("day:2024-02-29");
    const input = {
      bucket: {
        ...bucket("p", descriptor.key),
        strategy: descriptor.strategy,
        start: descriptor.start,
        end: descriptor.end,
      },
      generation: 7,
      format: "json" as const,
      payload: { key: "k", sha256: "0".repeat(64), rowCount: 1, byteLength: 2 },
    };
    expect(Buffer.from(serializeManifest(buildManifest(input)))).toEqual(
      Buffer.from(serializeManifest(buildManifest(input))),
    );
  });
});
