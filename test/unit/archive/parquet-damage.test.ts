/**
 * Damaged Parquet payloads the fuzz suite (test/fuzz/payloads.fuzz.test.ts)
 * found escaping as something other than an ArchiveIntegrityError: each is
 * kept here as a plain case.
 */
import { zstdCompressSync } from "node:zlib";
import { parquetMetadata } from "hyparquet";
import { parquetHeader } from "hyparquet/src/column.js";
import { Encoding } from "../../../src/archive/parquet/footer.js";
import { ThriftWriter } from "../../../src/archive/parquet/thrift.js";
import { describe, expect, it, onTestFinished } from "vitest";
import { memoryByteSource, type ByteSource } from "../../../src/archive/byte-sources.js";
import { ParquetPayloadReader } from "../../../src/archive/parquet/reader.js";
import { decompressZstdPage } from "../../../src/archive/parquet/zstd-page.js";
import { inspectPayload, readRecordBatches } from "../../../src/archive/payload-reader.js";
import { classifyFailure } from "../../../src/domain/failures.js";
import { undecodableValuePage } from "../../support/integrity.js";
import { encodePayload } from "../../../src/archive/payload-writer.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";

const START = parseRfc3339Micros("2024-01-01T00:00:00Z");
const rows: BucketRow[] = Array.from({ length: 40 }, (_, i) => ({
  eventTime: START + BigInt(i) * 1_000_000n,
  sortKey: Buffer.from(`sk-${i}`),
  value: Buffer.from(`value ${i}`),
}));

/** 40 rows in row groups of 16, by the native writer. */
async function payload(): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  async function* pages() {
    yield rows;
  }
  for await (const chunk of encodePayload("parquet", new Uint8Array([1]), pages(), undefined, {
    rowGroupRows: 16,
  })) {
    chunks.push(Uint8Array.from(chunk));
  }
  return Buffer.concat(chunks);
}

/** Where the footer (FileMetaData) starts. */
const footerStart = (bytes: Buffer) => bytes.length - 8 - bytes.readUInt32LE(bytes.length - 8);

async function readAll(source: ByteSource): Promise<number> {
  let count = 0;
  for await (const batch of readRecordBatches(source, "parquet")) count += batch.length;
  return count;
}

describe("damaged Parquet payloads", () => {
  it("the undamaged payload reads back whole, so each damage below is all that differs", async () => {
    expect(await readAll(memoryByteSource("p", await payload()))).toBe(rows.length);
  });

  it("a row group whose footer states no row count is an ArchiveIntegrityError, not a RangeError", async () => {
    const bytes = await payload();
    // RowGroup.num_rows (field 3, i64 16: header 0x16, zigzag 0x20) before
    // file_offset (field 5: 0x26): renumber it to an unknown field 10.
    const at = bytes.indexOf(Buffer.from([0x16, 0x20, 0x26]), footerStart(bytes));
    expect(at).toBeGreaterThan(0);
    bytes[at] = 0x76;
    const error = await ParquetPayloadReader.open(memoryByteSource("p", bytes)).catch((e) => e);
    expect(error).toBeInstanceOf(ArchiveIntegrityError);
    expect(String(error)).toMatch(/states undefined rows for row group 0/);
  });

  it("a footer offset outside the object is refused without a read outside it", async () => {
    const bytes = await payload();
    // The first column chunk's ColumnMetaData.data_page_offset (field 9, i64
    // 4: header 0x26 after field 7, zigzag 0x08) made negative (-1).
    const at = bytes.indexOf(Buffer.from([0x26, 0x08]), footerStart(bytes));
    expect(at).toBeGreaterThan(0);
    bytes[at + 1] = 0x01;
    const inner = memoryByteSource("p", bytes);
    const outside: string[] = [];
    const source: ByteSource = {
      ...inner,
      name: inner.name,
      byteLength: inner.byteLength,
      read: (start, end) => {
        if (start < 0 || end > bytes.length) outside.push(`[${start}, ${end})`);
        return inner.read(start, end);
      },
      stream: () => inner.stream(),
    };
    await expect(readAll(source)).rejects.toBeInstanceOf(ArchiveIntegrityError);
    expect(outside).toEqual([]);
  });

  it("a column chunk naming no envelope column fails the read with no rejection left unhandled", async () => {
    const bytes = await payload();
    // Damage the first page of row group 0's partition_key chunk (its CRC no
    // longer matches), and rename row group 0's event_time chunk: the
    // decoder starts reading the first before it fails on the second.
    const frame = bytes.indexOf(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), 4);
    bytes[frame + 8]! ^= 0xff;
    const footer = footerStart(bytes);
    const inSchema = bytes.indexOf("event_time", footer);
    const inRowGroup = bytes.indexOf("event_time", inSchema + 1);
    expect(inRowGroup).toBeGreaterThan(inSchema);
    bytes.write("event_tima", inRowGroup);
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", listener);
    onTestFinished(() => void process.off("unhandledRejection", listener));

    await expect(readAll(memoryByteSource("p", bytes))).rejects.toBeInstanceOf(
      ArchiveIntegrityError,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(unhandled).toEqual([]);
  });

  it("a data page stating more values than its row group has rows is refused before they are allocated", async () => {
    const bytes = await payload();
    // Rewrite the header of row group 0's first event_time page to state 2^26
    // values (512 MiB of INT64s to a decoder that believed it).
    const metadata = parquetMetadata(new Uint8Array(bytes).buffer);
    const at = Number(metadata.row_groups[0]!.columns[1]!.meta_data!.data_page_offset);
    const reader = { view: new DataView(bytes.buffer, bytes.byteOffset), offset: at };
    const header = parquetHeader(reader);
    const length = reader.offset - at;
    // The same header with no CRC and 2^26 values, padded by an unknown
    // binary field to its old length so that no offset moves.
    const lying = (filler: number) => {
      const out = new ThriftWriter();
      out.struct(() => {
        out.i32(1, 0);
        out.i32(2, header.uncompressed_page_size);
        out.i32(3, header.compressed_page_size);
        out.structField(5, () => {
          out.i32(1, 2 ** 26);
          out.i32(2, Encoding.PLAIN);
          out.i32(3, Encoding.RLE);
          out.i32(4, Encoding.RLE);
        });
        if (filler > 0) out.binary(15, new Uint8Array(filler - 2));
      });
      return out.bytes();
    };
    const shortBy = length - lying(0).length;
    expect(shortBy).toBeGreaterThanOrEqual(2);
    bytes.set(lying(shortBy), at);
    const before = process.memoryUsage().arrayBuffers;
    const error = await readAll(memoryByteSource("p", bytes)).catch((e: unknown) => e);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * 1024 * 1024);
    expect(error).toBeInstanceOf(ArchiveIntegrityError);
    expect(String(error)).toMatch(/states 67108864 values, more than any row group's 16 rows/);
  });

  it("a page the decoder itself refuses, with no CRC to catch it first, is an ArchiveIntegrityError naming the object on every path that decodes", async () => {
    const bytes = undecodableValuePage(await payload());
    const error = await readAll(memoryByteSource("p.parquet", bytes)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ArchiveIntegrityError);
    expect(error).toMatchObject({ objectKey: "p.parquet" });
    expect(String(error)).toMatch(/does not decode.*window/);
    const inspected = await inspectPayload(memoryByteSource("p.parquet", bytes), "parquet").catch(
      (e: unknown) => e,
    );
    expect(inspected).toBeInstanceOf(ArchiveIntegrityError);
    expect(inspected).toMatchObject({ objectKey: "p.parquet" });
    expect(classifyFailure(inspected)).toBe("own");
  });

  it("a ZSTD frame claiming gigabytes is refused before they are allocated", () => {
    const page = zstdCompressSync(Buffer.from("value ".repeat(100)));
    const before = process.memoryUsage().arrayBuffers;
    // A frame with no content size and a 1.875 GiB window (descriptor 0xa7).
    const window = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xa7, 0x01, 0x00, 0x00]);
    expect(() => decompressZstdPage(window, 600)).toThrow(/window/);
    // A frame stating a content size of 2 GiB - 16 (descriptor 0xa0: four bytes).
    const content = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0xf0, 0xff, 0xff, 0x7f, 0x01, 0, 0]);
    expect(() => decompressZstdPage(content, 600)).toThrow(/frame claims 2147483632 bytes/);
    // A page header stating 2 GiB - 1 for a 600-byte page's few compressed bytes.
    expect(() => decompressZstdPage(page, 0x7fffffff)).toThrow(/cannot decompress/);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * 1024 * 1024);
    expect(Buffer.from(decompressZstdPage(page, 600)).toString()).toBe("value ".repeat(100));
  });
});
