import { createHash } from "node:crypto";
import { mkdtemp, readFile as readFixture, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { countRows, readRecords } from "../../../src/archive/payload-reader.js";
import { ParquetPayloadReader } from "../../../src/archive/parquet/reader.js";
import {
  fileByteSource,
  memoryByteSource,
  objectByteSource,
} from "../../../src/archive/byte-sources.js";
import { writePayloadFile, type WrittenPayload } from "../../../src/archive/payload-writer.js";
import { MemoryObjectStore } from "../../../src/adapters/object-store/memory.js";
import {
  ArchiveIntegrityError,
  InvalidInputError,
  InvariantViolationError,
} from "../../../src/errors.js";
import { compareClustering, recordToJson, type TableRecord } from "../../../src/domain/record.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";

const sha256Of = async (file: string) =>
  createHash("sha256")
    .update(await readFixture(file))
    .digest("hex");

const FORMATS = ["parquet", "json"] as const;
const T2024 = parseRfc3339Micros("2024-01-01T00:00:00Z");

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "archive-payload-test-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Deterministic pseudo-random bytes (xorshift), so values do not compress away. */
function pseudoRandomBytes(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed | 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

function makeRows(
  count: number,
  options: { start?: bigint; valueBytes?: number; stepMicros?: bigint } = {},
): BucketRow[] {
  const start = options.start ?? T2024;
  const step = options.stepMicros ?? 1000n;
  return Array.from({ length: count }, (_, i) => ({
    eventTime: start + BigInt(i) * step,
    sortKey: Buffer.from(`sk-${String(i).padStart(8, "0")}`),
    value: pseudoRandomBytes(options.valueBytes ?? 32, i + 1),
  }));
}

async function* pages(rows: readonly BucketRow[], pageSize = 1000): AsyncIterable<BucketRow[]> {
  for (let i = 0; i < rows.length; i += pageSize) yield rows.slice(i, i + pageSize);
}

let fileCounter = 0;
async function write(
  format: (typeof FORMATS)[number],
  partitionKey: Uint8Array,
  rows: readonly BucketRow[],
  options: { pageSize?: number; rowGroupRows?: number } = {},
): Promise<WrittenPayload> {
  return await writePayloadFile(
    format,
    partitionKey,
    pages(rows, options.pageSize),
    path.join(dir, `p${fileCounter++}.${format}`),
    { rowGroupRows: options.rowGroupRows ?? 4096 },
  );
}

async function readAll(filePath: string, format: (typeof FORMATS)[number]): Promise<TableRecord[]> {
  const source = await fileByteSource(filePath);
  try {
    const out: TableRecord[] = [];
    for await (const record of readRecords(source, format)) out.push(record);
    return out;
  } finally {
    await source.close();
  }
}

function expectSameRecords(
  actual: TableRecord[],
  partitionKey: Uint8Array,
  rows: readonly BucketRow[],
) {
  expect(actual.length).toBe(rows.length);
  const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));
  const firstDifference = actual.findIndex((record, i) => {
    const row = rows[i]!;
    return (
      !same(record.partitionKey, partitionKey) ||
      record.eventTime !== row.eventTime ||
      !same(record.sortKey, row.sortKey) ||
      !same(record.value, row.value)
    );
  });
  expect(firstDifference).toBe(-1);
}

describe.each(FORMATS)("%s payloads", (format) => {
  it("an empty bucket round-trips to zero records", async () => {
    const written = await write(format, Buffer.from("p"), []);
    expect(written.rowCount).toBe(0);
    expect(await readAll(written.filePath, format)).toEqual([]);
    const source = await fileByteSource(written.filePath);
    expect(await countRows(source, format)).toBe(0);
    await source.close();
  });

  it("a single record round-trips exactly", async () => {
    const rows = makeRows(1);
    const written = await write(format, Buffer.from("p"), rows);
    expectSameRecords(await readAll(written.filePath, format), Buffer.from("p"), rows);
  });

  it("twenty thousand records across several row groups round-trip in order", async () => {
    const rows = makeRows(20_000, { valueBytes: 40 });
    const written = await write(format, Buffer.from("partition"), rows, { rowGroupRows: 4096 });
    expect(written.rowCount).toBe(20_000);
    expectSameRecords(await readAll(written.filePath, format), Buffer.from("partition"), rows);
    if (format === "parquet") {
      const source = await fileByteSource(written.filePath);
      const reader = await ParquetPayloadReader.open(source);
      expect(reader.rowGroups.map((g) => g.rowCount)).toEqual([4096, 4096, 4096, 4096, 3616]);
      expect(reader.rowGroups[1]!.minEventTime).toBe(rows[4096]!.eventTime);
      expect(reader.rowGroups[1]!.maxEventTime).toBe(rows[8191]!.eventTime);
      await source.close();
    }
  });

  it("keeps edge-case keys, values and times exact", async () => {
    const partitionKey = new Uint8Array(200).map((_, i) => (i * 37) & 0xff);
    partitionKey[0] = 0x00;
    partitionKey[199] = 0xff;
    const start = parseRfc3339Micros("1969-01-01T00:00:00Z");
    const end = parseRfc3339Micros("1970-01-01T00:00:00Z");
    const rows: BucketRow[] = [
      { eventTime: start, sortKey: new Uint8Array([]), value: new Uint8Array([]) },
      { eventTime: start, sortKey: new Uint8Array([0x00]), value: new Uint8Array([0x00, 0xff]) },
      { eventTime: start + 1n, sortKey: Buffer.from("k"), value: pseudoRandomBytes(100 * 1024, 7) },
      { eventTime: start + 1n, sortKey: Buffer.from("k\u0000"), value: new Uint8Array([0xff]) },
      { eventTime: start + 1n, sortKey: Buffer.from([0x6b, 0xff]), value: new Uint8Array([]) },
      {
        eventTime: -1_500_001n,
        sortKey: new Uint8Array([0xff, 0xff, 0xff]),
        value: Buffer.from("x"),
      },
      { eventTime: end - 1n, sortKey: new Uint8Array([0xff]), value: Buffer.from("last") },
    ];
    rows.forEach((row, i) => i > 0 && expect(compareClustering(rows[i - 1]!, row)).toBeLessThan(0));
    const written = await write(format, partitionKey, rows);
    expectSameRecords(await readAll(written.filePath, format), partitionKey, rows);
  });

  it("encodes the same records to the same bytes whatever the snapshot page size", async () => {
    const rows = makeRows(10_000);
    const a = await write(format, Buffer.from("p"), rows, { pageSize: 1000 });
    const b = await write(format, Buffer.from("p"), rows, { pageSize: 777 });
    const c = await write(format, Buffer.from("p"), rows, { pageSize: 10_000 });
    const [hashA, hashB, hashC] = await Promise.all([a, b, c].map((w) => sha256Of(w.filePath)));
    expect(hashB).toBe(hashA);
    expect(hashC).toBe(hashA);
    expect(b.rowsDigest).toBe(a.rowsDigest);
  });

  it("refuses rows that are out of clustering order or repeated", async () => {
    const rows = makeRows(3);
    await expect(
      write(format, Buffer.from("p"), [rows[0]!, rows[2]!, rows[1]!]),
    ).rejects.toBeInstanceOf(InvariantViolationError);
    await expect(write(format, Buffer.from("p"), [rows[0]!, rows[0]!])).rejects.toBeInstanceOf(
      InvariantViolationError,
    );
  });
});

describe("json payloads", () => {
  it("are newline-delimited records in the record JSON form", async () => {
    const rows = makeRows(2);
    const written = await write("json", Buffer.from("p"), rows);
    const { readFile } = await import("node:fs/promises");
    const text = await readFile(written.filePath, "utf8");
    expect(text).toBe(
      rows
        .map((r) => `${JSON.stringify(recordToJson({ partitionKey: Buffer.from("p"), ...r }))}\n`)
        .join(""),
    );
  });

  it("a legacy raw JSON array payload stays readable", async () => {
    const records: TableRecord[] = makeRows(3).map((r) => ({
      partitionKey: Buffer.from("p"),
      ...r,
    }));
    const legacy = Buffer.from(
      `  \n[${records.map((r) => JSON.stringify(recordToJson(r))).join(",\n")}]`,
    );
    const out: TableRecord[] = [];
    for await (const record of readRecords(memoryByteSource("legacy.json", legacy), "json"))
      out.push(record);
    expectSameRecords(out, Buffer.from("p"), makeRows(3));
  });

  it("a truncated or malformed NDJSON payload is an integrity error", async () => {
    const written = await write("json", Buffer.from("p"), makeRows(3));
    const { readFile } = await import("node:fs/promises");
    const bytes = await readFile(written.filePath);
    for (const bad of [
      bytes.subarray(0, bytes.length - 1),
      bytes.subarray(0, bytes.length - 10),
      Buffer.concat([bytes, Buffer.from("{}\n")]),
    ]) {
      await expect(countRows(memoryByteSource("bad.json", bad), "json")).rejects.toBeInstanceOf(
        ArchiveIntegrityError,
      );
    }
  });
});

describe("parquet payloads", () => {
  it("reject event times a nanosecond timestamp cannot hold, naming json as the way out", async () => {
    const rows: BucketRow[] = [
      {
        eventTime: parseRfc3339Micros("1600-01-01T00:00:00Z"),
        sortKey: Buffer.from("a"),
        value: Buffer.from("v"),
      },
    ];
    await expect(write("parquet", Buffer.from("p"), rows)).rejects.toThrow(InvalidInputError);
    await expect(write("parquet", Buffer.from("p"), rows)).rejects.toThrow(/json/);
    const json = await write("json", Buffer.from("p"), rows);
    expect(json.rowCount).toBe(1);
  });

  it("a truncated file or a flipped byte is an integrity error", async () => {
    const written = await write("parquet", Buffer.from("p"), makeRows(5000, { valueBytes: 64 }), {
      rowGroupRows: 1024,
    });
    const { readFile } = await import("node:fs/promises");
    const bytes = new Uint8Array(await readFile(written.filePath));
    await expect(
      countRows(memoryByteSource("t.parquet", bytes.subarray(0, bytes.length - 100)), "parquet"),
    ).rejects.toBeInstanceOf(ArchiveIntegrityError);
    const flipped = bytes.slice();
    flipped[200] = flipped[200]! ^ 0xff; // inside the first column chunk's compressed data
    await expect(
      countRows(memoryByteSource("f.parquet", flipped), "parquet"),
    ).rejects.toBeInstanceOf(ArchiveIntegrityError);
  });

  it("rejects nanosecond values that are not whole microseconds and binaries annotated as strings", async () => {
    const nanos = await foreignParquet("foreign-nanos.parquet");
    await expect(countRows(memoryByteSource("ns.parquet", nanos), "parquet")).rejects.toThrow(
      /whole number of microseconds/,
    );
    const strings = await foreignParquet("foreign-utf8-value.parquet");
    await expect(countRows(memoryByteSource("s.parquet", strings), "parquet")).rejects.toThrow(
      /annotation|not record schema v2/,
    );
  });

  it("a narrow time range reads only the overlapping row groups", async () => {
    const rows = makeRows(20_000, { valueBytes: 512 });
    const written = await write("parquet", Buffer.from("p"), rows, { rowGroupRows: 1024 });
    const store = new MemoryObjectStore();
    const { readFile } = await import("node:fs/promises");
    await store.createIfAbsent("payload.parquet", new Uint8Array(await readFile(written.filePath)));

    const full = await objectByteSource(store, "payload.parquet");
    expect(await countRows(full, "parquet")).toBe(20_000);

    const narrow = await objectByteSource(store, "payload.parquet", written.byteLength);
    const reader = await ParquetPayloadReader.open(narrow);
    const from = rows[5000]!.eventTime;
    const to = rows[5010]!.eventTime;
    expect(reader.rowGroupsOverlapping(from, to).map((g) => g.index)).toEqual([4]);
    const got: TableRecord[] = [];
    for await (const batch of reader.readRange(from, to)) got.push(...batch);
    expectSameRecords(got, Buffer.from("p"), rows.slice(5000, 5010));
    expect(narrow.bytesFetched).toBeLessThan(full.bytesFetched / 5);
    expect(narrow.bytesFetched).toBeLessThan(written.byteLength / 5);
  });
});

/**
 * A one-row Parquet file of a schema our writer never produces, written
 * straight from Arrow by parquet-wasm (at 4210572, before issue 31 removed
 * it): event_time 1,000,000,500 ns (not whole microseconds), or a value
 * column annotated as a UTF-8 string.
 */
async function foreignParquet(name: string): Promise<Uint8Array> {
  return new Uint8Array(await readFixture(new URL(`./fixtures/${name}`, import.meta.url)));
}
