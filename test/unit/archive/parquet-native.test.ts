import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { DuckDBInstance, type DuckDBBlobValue } from "@duckdb/node-api";
import {
  parquetMetadata,
  parquetReadObjects,
  readOffsetIndex,
  type FileMetaData,
  type OffsetIndex,
} from "hyparquet";
import { crc32, zstdDecompressSync } from "node:zlib";
import { parquetHeader } from "hyparquet/src/column.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { memoryByteSource, ownArrayBuffer } from "../../../src/archive/byte-sources.js";
import { encodeParquet } from "../../../src/archive/parquet/encode.js";
import { ARROW_SCHEMA_BASE64 } from "../../../src/archive/parquet/layout.js";
import { ParquetPayloadReader } from "../../../src/archive/parquet/reader.js";
import { inspectPayload } from "../../../src/archive/payload-reader.js";
import { verifyParquetColumns } from "../../../src/archive/parquet/verify-columns.js";
import { RowStreamGuard } from "../../../src/archive/row-guard.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";
import { expectedStats, KEY, makeRows, PARQUET_CASES } from "./parquet-cases.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "parquet-native-test-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function* pagesOf(rows: readonly BucketRow[], pageSize: number) {
  for (let i = 0; i < rows.length; i += pageSize) yield rows.slice(i, i + pageSize);
  if (rows.length === 0) yield [];
}

/**
 * A payload parquet-wasm wrote (at 4210572, the last commit with that
 * writer) from {@link WASM_ROWS} in row groups of 2,048: the reference the
 * native writer's layout is held to, and an archive written before it.
 */
const WASM_ROWS = () => makeRows(5_000, (i) => 8 + (i % 24));
const WASM_DIGEST = "7f3685c35063c576080042a36cd9302303450878c12dbbe3b33d4ffdca2754e8";
const wasmPayload = () =>
  readFile(new URL("./fixtures/parquet-wasm-5000.parquet", import.meta.url)).then((b) =>
    Buffer.from(b),
  );

interface Written {
  readonly bytes: Buffer;
  readonly digest: string;
}

async function write(
  rows: readonly BucketRow[],
  rowGroupRows?: number,
  pageSize = 1000,
): Promise<Written> {
  const guard = new RowStreamGuard();
  const chunks: Uint8Array[] = [];
  for await (const chunk of encodeParquet(KEY, pagesOf(rows, pageSize), guard, { rowGroupRows }))
    chunks.push(chunk);
  return { bytes: Buffer.concat(chunks), digest: guard.digest.digest() };
}

const arrayBuffer = (bytes: Buffer) => ownArrayBuffer(bytes);

/** Every row as the project's reader decodes it, and the verification's digest. */
async function readOwn(bytes: Buffer) {
  const reader = await ParquetPayloadReader.open(memoryByteSource("own", bytes));
  const records = [];
  for await (const batch of reader.readRange()) records.push(...batch);
  const content = await inspectPayload(memoryByteSource("own", bytes), "parquet", {
    partitionKey: KEY,
  });
  return { records, content, rowGroups: reader.rowGroups };
}

function expectSameRows(got: readonly BucketRow[], want: readonly BucketRow[]) {
  expect(got.length).toBe(want.length);
  const mismatch = got.findIndex((row, i) => {
    const w = want[i]!;
    return (
      row.eventTime !== w.eventTime ||
      !Buffer.from(row.sortKey).equals(Buffer.from(w.sortKey)) ||
      !Buffer.from(row.value).equals(Buffer.from(w.value))
    );
  });
  expect(mismatch).toBe(-1);
}

/** Exact values: nanoseconds as bigints, binary statistics as bytes. */
const NANOS = {
  timestampFromNanoseconds: (nanos: bigint) => nanos,
  stringFromBytes: (bytes: Uint8Array) => bytes as unknown as string,
};

async function readHyparquet(bytes: Buffer): Promise<BucketRow[]> {
  const objects = await parquetReadObjects({
    file: arrayBuffer(bytes),
    utf8: false,
    parsers: NANOS,
    compressors: { ZSTD: (input: Uint8Array) => zstdDecompressSync(input) },
  });
  return objects.map((o) => {
    expect(Buffer.from(o.partition_key as Uint8Array).equals(Buffer.from(KEY))).toBe(true);
    return {
      eventTime: (o.event_time as bigint) / 1000n,
      sortKey: o.sort_key as Uint8Array,
      value: o.value as Uint8Array,
    };
  });
}

async function readDuckDb(bytes: Buffer, name: string) {
  const file = path.join(dir, `${name}.parquet`);
  await writeFile(file, bytes);
  const db = await DuckDBInstance.create(":memory:");
  const connection = await db.connect();
  try {
    const result = await connection.runAndReadAll(
      `SELECT partition_key, epoch_ns(event_time) AS ns, sort_key, value FROM read_parquet('${file}')`,
    );
    const blob = (v: unknown) => Buffer.from((v as DuckDBBlobValue).bytes);
    const rows: BucketRow[] = result.getRows().map((row) => {
      expect(blob(row[0]).equals(Buffer.from(KEY))).toBe(true);
      return { eventTime: (row[1] as bigint) / 1000n, sortKey: blob(row[2]), value: blob(row[3]) };
    });
    const stats = await connection.runAndReadAll(
      `SELECT row_group_id, path_in_schema, stats_min_value, stats_max_value, compression
       FROM parquet_metadata('${file}') ORDER BY row_group_id, column_id`,
    );
    return { rows, stats: stats.getRowObjectsJS() };
  } finally {
    connection.closeSync();
    db.closeSync();
  }
}

function metadataOf(bytes: Buffer): FileMetaData {
  return parquetMetadata(arrayBuffer(bytes), { parsers: NANOS });
}

function offsetIndexes(bytes: Buffer, metadata: FileMetaData): OffsetIndex[][] {
  return metadata.row_groups.map((group) =>
    group.columns.map((column) => {
      const at = Number(column.offset_index_offset);
      const view = new DataView(arrayBuffer(bytes.subarray(at, at + column.offset_index_length!)));
      return readOffsetIndex({ view, offset: 0 });
    }),
  );
}

/** The chunk statistics a reader prunes by: event_time and sort_key min/max per row group. */
function chunkStats(metadata: FileMetaData) {
  return metadata.row_groups.map((group) => ({
    rows: group.num_rows,
    eventTime: [
      group.columns[1]!.meta_data!.statistics?.min_value,
      group.columns[1]!.meta_data!.statistics?.max_value,
    ],
    sortKey: [
      group.columns[2]!.meta_data!.statistics?.min_value,
      group.columns[2]!.meta_data!.statistics?.max_value,
    ],
  }));
}

describe("the native Parquet writer", () => {
  for (const [name, make, rowGroupRows] of PARQUET_CASES) {
    it(`${name}: every row, row-group statistics and offset index read back the same through our reader, hyparquet and DuckDB`, async () => {
      const rows = make();
      const { bytes, digest } = await write(rows, rowGroupRows);

      const own = await readOwn(bytes);
      expectSameRows(own.records, rows);
      for (const record of own.records)
        expect(Buffer.from(record.partitionKey).equals(Buffer.from(KEY))).toBe(true);
      expect(own.content).toEqual({ rowCount: rows.length, rowsDigest: digest });

      expectSameRows(await readHyparquet(bytes), rows);

      const duck = await readDuckDb(bytes, name.replace(/\W+/g, "-"));
      expectSameRows(duck.rows, rows);
      expect(new Set(duck.stats.map((s) => s.compression))).toEqual(
        new Set(rows.length === 0 ? [] : ["ZSTD"]),
      );

      const metadata = metadataOf(bytes);
      const groupRows = rowGroupRows ?? 16_384;
      const want = expectedStats(rows, groupRows);
      const got = chunkStats(metadata);
      expect(got.length).toBe(want.length);
      got.forEach((g, i) => {
        expect(Number(g.rows)).toBe(Math.min(groupRows, rows.length - i * groupRows));
        expect(g.eventTime).toEqual(want[i]!.times);
        expect(Buffer.from(g.sortKey[0] as Uint8Array)).toEqual(want[i]!.keys[0]);
        expect(Buffer.from(g.sortKey[1] as Uint8Array)).toEqual(want[i]!.keys[1]);
      });
      // DuckDB sees min/max statistics on event_time and sort_key of every row group, none elsewhere.
      for (const stat of duck.stats) {
        const kept = stat.path_in_schema === "event_time" || stat.path_in_schema === "sort_key";
        expect(stat.stats_min_value !== null, String(stat.path_in_schema)).toBe(kept);
        expect(stat.stats_max_value !== null, String(stat.path_in_schema)).toBe(kept);
      }
      expect(own.rowGroups.map((g) => [g.minEventTime, g.maxEventTime])).toEqual(
        want.map((w) => w.times.map((ns) => ns / 1000n)),
      );

      // Every column chunk's offset index names its pages in order, back to back, from row 0.
      const indexes = offsetIndexes(bytes, metadata);
      indexes.forEach((columns, g) =>
        columns.forEach((index, c) => {
          const pages = index.page_locations;
          expect(pages[0]!.first_row_index).toBe(0n);
          const meta = metadata.row_groups[g]!.columns[c]!.meta_data!;
          expect(pages[0]!.offset).toBe(meta.data_page_offset);
          for (let p = 1; p < pages.length; p++) {
            expect(pages[p]!.offset).toBe(
              pages[p - 1]!.offset + BigInt(pages[p - 1]!.compressed_page_size),
            );
            expect(pages[p]!.first_row_index > pages[p - 1]!.first_row_index).toBe(true);
          }
          const last = pages[pages.length - 1]!;
          const chunkEnd =
            (meta.dictionary_page_offset ?? meta.data_page_offset) + meta.total_compressed_size;
          expect(last.offset + BigInt(last.compressed_page_size)).toBe(chunkEnd);
        }),
      );
    });
  }

  it("verification decodes the writer's payloads, and parquet-wasm's, on their columns to the writer's digest", async () => {
    for (const [, make, rowGroupRows] of PARQUET_CASES) {
      const rows = make();
      const { bytes, digest } = await write(rows, rowGroupRows);
      expect(
        await verifyParquetColumns(memoryByteSource("own", bytes), { partitionKey: KEY }),
      ).toEqual({ rowCount: rows.length, rowsDigest: digest });
    }
    // parquet-wasm wrote the same layout: its payloads verify on their columns too.
    const wasm = await wasmPayload();
    expect(await verifyParquetColumns(memoryByteSource("wasm", wasm), {})).toEqual({
      rowCount: 5_000,
      rowsDigest: WASM_DIGEST,
    });
    expect(
      await inspectPayload(memoryByteSource("wasm", wasm), "parquet", { partitionKey: KEY }),
    ).toEqual({ rowCount: 5_000, rowsDigest: WASM_DIGEST });
  });

  it("column verification refuses rows of another bucket's partition key or outside the bucket's bounds", async () => {
    const rows = makeRows(3_000);
    const { bytes } = await write(rows, 1_000);
    const verify = (b: Buffer, expected: object) =>
      verifyParquetColumns(memoryByteSource("t", b), expected);
    await expect(verify(bytes, { partitionKey: new Uint8Array([1, 2, 3]) })).rejects.toThrow(
      /partition key of another bucket/,
    );
    await expect(verify(bytes, { partitionKey: KEY, end: rows[2_500]!.eventTime })).rejects.toThrow(
      /outside the bucket/,
    );
  });

  it("writes the same bytes for the same rows, whatever the snapshot's page size", async () => {
    const rows = makeRows(3_000);
    const a = await write(rows, 1_000, 1_000);
    const b = await write(rows, 1_000, 7);
    const c = await write(rows, 1_000, 3_000);
    expect(b.bytes.equals(a.bytes)).toBe(true);
    expect(c.bytes.equals(a.bytes)).toBe(true);
  });

  it("cuts event_time, sort_key and partition_key pages where parquet-wasm did, and its payload and ours read back as the same rows with the same statistics and metadata", async () => {
    const wasm = await wasmPayload();
    const native = await write(WASM_ROWS(), 2_048);
    expect(native.digest).toBe(WASM_DIGEST);
    const [ownNative, ownWasm] = [await readOwn(native.bytes), await readOwn(wasm)];
    expect(ownNative.content).toEqual(ownWasm.content);
    expect(ownNative.rowGroups).toEqual(ownWasm.rowGroups);
    expectSameRows(ownNative.records, ownWasm.records);
    const [metaNative, metaWasm] = [metadataOf(native.bytes), metadataOf(wasm)];
    expect(chunkStats(metaNative)).toEqual(chunkStats(metaWasm));
    expect(metaNative.key_value_metadata).toEqual(metaWasm.key_value_metadata);
    expect(metaNative.schema).toEqual(metaWasm.schema);
    expect(metaNative.created_by).toBe(metaWasm.created_by);
    const firstRows = (bytes: Buffer, meta: FileMetaData) =>
      offsetIndexes(bytes, meta).map((columns) =>
        // parquet-wasm cut value pages by an estimate of its own; ours close at
        // the first multiple of 128 rows past 16 KiB (see native.ts).
        columns
          .slice(0, 3)
          .map((index) => index.page_locations.map((page) => page.first_row_index)),
      );
    expect(firstRows(native.bytes, metaNative)).toEqual(firstRows(wasm, metaWasm));
  });

  it("compresses every column as tightly as parquet-wasm did (a stream's large-input parameters once doubled event_time)", async () => {
    const sizes = (bytes: Buffer) => {
      const totals = new Map<string, number>();
      for (const group of metadataOf(bytes).row_groups)
        for (const chunk of group.columns) {
          const name = chunk.meta_data!.path_in_schema.join(".");
          totals.set(
            name,
            (totals.get(name) ?? 0) + Number(chunk.meta_data!.total_compressed_size),
          );
        }
      return totals;
    };
    const native = sizes((await write(WASM_ROWS(), 2_048)).bytes);
    const wasm = sizes(await wasmPayload());
    for (const column of ["event_time", "sort_key", "value"])
      expect(native.get(column)!, column).toBeLessThanOrEqual(wasm.get(column)! * 1.05);
  });

  it("a snapshot failing mid-payload rejects with its own error, after the row groups before it, and stops reading", async () => {
    const rows = makeRows(3_000);
    const failure = new Error("snapshot page 3 failed");
    let served = 0;
    let closed = false;
    async function* failing() {
      try {
        for (let i = 0; i < 3; i++) {
          served++;
          yield rows.slice(i * 1_000, (i + 1) * 1_000);
        }
        throw failure;
      } finally {
        closed = true;
      }
    }
    const chunks: Uint8Array[] = [];
    const encoding = (async () => {
      for await (const chunk of encodeParquet(KEY, failing(), new RowStreamGuard(), {
        rowGroupRows: 1_000,
      }))
        chunks.push(chunk);
    })();
    await expect(encoding).rejects.toBe(failure);
    expect(served).toBe(3);
    expect(closed).toBe(true);
    // Whatever left before the failure is a file without a footer: never a payload.
    expect(() => metadataOf(Buffer.concat(chunks))).toThrow();
  });

  it("a consumer that stops early ends the snapshot without reading the rest", async () => {
    let served = 0;
    let closed = false;
    async function* endless() {
      try {
        for (let i = 0; ; i++) {
          served++;
          yield makeRows(1_000).map((row) => ({
            ...row,
            eventTime: row.eventTime + BigInt(i) * 10n ** 9n,
          }));
        }
      } finally {
        closed = true;
      }
    }
    for await (const chunk of encodeParquet(KEY, endless(), new RowStreamGuard(), {
      rowGroupRows: 500,
    })) {
      if (chunk.byteLength > 4) break;
    }
    expect(closed).toBe(true);
    expect(served).toBeLessThan(4);
  });

  it("embeds the Arrow schema parquet-wasm wrote", async () => {
    const ours = metadataOf((await write(makeRows(1))).bytes);
    const wasm = metadataOf(await wasmPayload());
    for (const meta of [ours, wasm]) {
      const arrow = meta.key_value_metadata?.find((kv) => kv.key === "ARROW:schema");
      expect(arrow?.value).toBe(ARROW_SCHEMA_BASE64);
    }
  });

  it("records the CRC-32 of its stored bytes in every data and dictionary page header (parquet-wasm records none)", async () => {
    const rows = makeRows(5_000);
    const pagesOf = (bytes: Buffer) => {
      const found: { type: string; crc: number | undefined; actual: number }[] = [];
      for (const group of metadataOf(bytes).row_groups) {
        for (const column of group.columns) {
          const meta = column.meta_data!;
          const reader = {
            view: new DataView(arrayBuffer(bytes)),
            offset: Number(meta.dictionary_page_offset ?? meta.data_page_offset),
          };
          const end = reader.offset + Number(meta.total_compressed_size);
          while (reader.offset < end) {
            const header = parquetHeader(reader);
            const body = bytes.subarray(reader.offset, reader.offset + header.compressed_page_size);
            reader.offset += header.compressed_page_size;
            found.push({ type: header.type, crc: header.crc, actual: crc32(body) | 0 });
          }
        }
      }
      return found;
    };
    const native = pagesOf((await write(rows, 2_000)).bytes);
    expect(new Set(native.map((p) => p.type))).toEqual(new Set(["DICTIONARY_PAGE", "DATA_PAGE"]));
    expect(native.filter((p) => p.crc !== p.actual)).toEqual([]);
    // Payloads parquet-wasm wrote before issue 31 carry none, and still read (test above).
    const wasm = pagesOf(await wasmPayload());
    expect(wasm.filter((p) => p.crc !== undefined)).toEqual([]);
  });

  it("a range read refuses a page whose bytes no longer match its CRC, before decoding it", async () => {
    const { bytes } = await write(makeRows(5_000), 2_000);
    const meta = metadataOf(bytes).row_groups[1]!.columns[2]!.meta_data!;
    const reader = {
      view: new DataView(arrayBuffer(bytes)),
      offset: Number(meta.data_page_offset),
    };
    const header = parquetHeader(reader);
    const changed = Buffer.from(bytes);
    changed[reader.offset + header.compressed_page_size - 1]! ^= 0x01;
    const source = memoryByteSource("payloads/changed.parquet", changed);
    const own = await ParquetPayloadReader.open(source);

    expect((await own.readRowGroup(0)).length).toBe(2_000);
    const failure = own.readRowGroup(1);
    await expect(failure).rejects.toBeInstanceOf(ArchiveIntegrityError);
    await expect(failure).rejects.toThrow(
      /payloads\/changed.parquet failed verification: the page at byte \d+ has CRC-32/,
    );
  });
});
