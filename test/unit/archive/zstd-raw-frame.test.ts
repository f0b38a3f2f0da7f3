/**
 * Pages Zstandard stored verbatim (one raw block): the columnar verification
 * reads them where they lie in the chunk instead of decompressing them
 * (rawFrameContent in zstd-page.ts, issue 31). What it accepts must be
 * exactly what a decoder gives, and anything else must go to the decoder.
 */
import { randomBytes } from "node:crypto";
import { constants, zstdCompressSync, zstdDecompressSync } from "node:zlib";
import { parquetHeader } from "hyparquet/src/column.js";
import { parquetMetadata } from "hyparquet";
import { describe, expect, it, vi } from "vitest";
import { memoryByteSource, ownArrayBuffer } from "../../../src/archive/byte-sources.js";
import { encodeParquet } from "../../../src/archive/parquet/encode.js";
import { dataPageHeader, Encoding } from "../../../src/archive/parquet/footer.js";
import { PageCompressor } from "../../../src/archive/parquet/page-compressor.js";
import { ThriftWriter } from "../../../src/archive/parquet/thrift.js";
import { verifyParquetColumns } from "../../../src/archive/parquet/verify-columns.js";
import { rawFrameContent } from "../../../src/archive/parquet/zstd-page.js";
import { RowStreamGuard } from "../../../src/archive/row-guard.js";
import { incompressibleRows, KEY, makeRows } from "./parquet-cases.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";
import { rowPageOf } from "../../../src/ports/row-page.js";

/** The payload's bytes, the snapshot given in pages of `pageRows`. */
async function encode(rows: readonly BucketRow[], pageRows: number, rowGroupRows = 1_000) {
  async function* pages() {
    for (let at = 0; at < rows.length; at += pageRows) yield rows.slice(at, at + pageRows);
  }
  const chunks: Uint8Array[] = [];
  for await (const chunk of encodeParquet(KEY, pages(), new RowStreamGuard(), { rowGroupRows }))
    chunks.push(Uint8Array.from(chunk));
  return Buffer.concat(chunks);
}

/** Per row group, the value column chunk's stored and uncompressed sizes. */
function valueChunkSizes(bytes: Buffer): { stored: number; plain: number }[] {
  return parquetMetadata(ownArrayBuffer(bytes)).row_groups.map((group) => {
    const meta = group.columns[3]!.meta_data!;
    return {
      stored: Number(meta.total_compressed_size),
      plain: Number(meta.total_uncompressed_size),
    };
  });
}

async function frameOf(page: Buffer): Promise<Buffer> {
  const zstd = new PageCompressor();
  try {
    return Buffer.from(await zstd.compress(page));
  } finally {
    zstd.close();
  }
}

describe("pages Zstandard stored raw", () => {
  it("an incompressible page's frame holds its bytes verbatim, exactly where a decoder finds them", async () => {
    const page = randomBytes(16 * 1024 + 300);
    const frame = await frameOf(page);
    const at = rawFrameContent(frame, page.byteLength);
    expect(at).toBeDefined();
    expect(frame.subarray(at!.start, at!.end)).toEqual(page);
    expect(zstdDecompressSync(frame)).toEqual(page);
  });

  it("any other frame is left to the decoder: compressed, checksummed, another size, truncated, trailing bytes, several blocks", async () => {
    const page = randomBytes(4096);
    const frame = await frameOf(page);
    expect(rawFrameContent(await frameOf(Buffer.alloc(4096, 7)), 4096)).toBeUndefined();
    const checksummed = zstdCompressSync(page, {
      params: { [constants.ZSTD_c_checksumFlag]: 1 },
    });
    expect(zstdDecompressSync(checksummed)).toEqual(page);
    expect(rawFrameContent(checksummed, 4096)).toBeUndefined();
    expect(rawFrameContent(frame, 4095)).toBeUndefined();
    expect(rawFrameContent(frame.subarray(0, frame.byteLength - 1), 4096)).toBeUndefined();
    expect(rawFrameContent(Buffer.concat([frame, Buffer.from([0])]), 4096)).toBeUndefined();
    const large = randomBytes(300 * 1024);
    expect(rawFrameContent(await frameOf(large), large.byteLength)).toBeUndefined();
  });

  it("a raw value page whose bytes changed under a matching CRC fails the verification's row digest", async () => {
    // Random values, as the bench's: Zstandard stores their pages raw.
    const rows = makeRows(2_000).map((row) => ({ ...row, value: randomBytes(200) }));
    const guard = new RowStreamGuard();
    const chunks: Uint8Array[] = [];
    async function* pages() {
      yield rows;
    }
    for await (const chunk of encodeParquet(KEY, pages(), guard, { rowGroupRows: 1_000 }))
      chunks.push(Uint8Array.from(chunk));
    const bytes = Buffer.concat(chunks);
    const digest = guard.digest.digest();
    const verified = await verifyParquetColumns(memoryByteSource("ok", bytes), {});
    expect(verified?.rowsDigest).toBe(digest);

    // The first value page, stored raw; one byte of a value changed and the
    // page's CRC recomputed, so only the decoded values can tell.
    const footer = parquetMetadata(ownArrayBuffer(bytes));
    const meta = footer.row_groups[0]!.columns[3]!.meta_data!;
    const reader = {
      view: new DataView(ownArrayBuffer(bytes)),
      offset: Number(meta.data_page_offset),
    };
    const headerStart = reader.offset;
    const header = parquetHeader(reader);
    const bodyStart = reader.offset;
    const body = bytes.subarray(bodyStart, bodyStart + header.compressed_page_size);
    const at = rawFrameContent(body, header.uncompressed_page_size);
    expect(at).toBeDefined();
    const oldHeader = bytes.subarray(headerStart, bodyStart);
    let damaged: Buffer | undefined;
    for (let flip = 1; flip < 256 && damaged === undefined; flip++) {
      const newBody = Buffer.from(body);
      newBody[at!.start + 10]! ^= flip;
      const newHeader = dataPageHeader(
        { compressed: newBody, uncompressedSize: header.uncompressed_page_size },
        header.data_page_header!.num_values,
        Encoding.PLAIN,
        new ThriftWriter(),
      );
      // Only a header of the same length keeps every later offset valid.
      if (newHeader.byteLength !== oldHeader.byteLength) continue;
      damaged = Buffer.concat([
        bytes.subarray(0, headerStart),
        newHeader,
        newBody,
        bytes.subarray(bodyStart + body.byteLength),
      ]);
    }
    expect(damaged).toBeDefined();
    const content = await verifyParquetColumns(memoryByteSource("damaged", damaged!), {});
    expect(content?.rowCount).toBe(rows.length);
    expect(content?.rowsDigest).not.toBe(digest);
  });

  it("once two row groups' value pages all came out raw, the writer compresses one value page per row group and stores the others raw itself", async () => {
    const rows = incompressibleRows(6_000);
    const spy = vi.spyOn(PageCompressor.prototype, "compress");
    try {
      await encode(rows, 1_000);
      const valuePages = spy.mock.calls.filter(([page]) => page.byteLength >= 104 * 204).length;
      // A row group holds 8 value pages (128 rows of 204 bytes each, the last 104):
      // groups 0 and 1 compress all 8, groups 2 to 5 one each.
      expect(valuePages).toBe(2 * 8 + 4);
    } finally {
      spy.mockRestore();
    }
  });

  it("the raw frames it writes itself are the same bytes whatever the snapshot's page size, and decode to the pages", async () => {
    const rows = incompressibleRows(6_000);
    const bytes = await encode(rows, 1_000);
    expect(await encode(rows, 7)).toEqual(bytes);
    const content = await verifyParquetColumns(memoryByteSource("raw", bytes), {});
    const guard = new RowStreamGuard();
    guard.acceptPage(rowPageOf(rows));
    expect(content?.rowsDigest).toBe(guard.digest.digest());
    // Every value page of the last row group is a raw frame zlib decodes.
    const meta = parquetMetadata(ownArrayBuffer(bytes)).row_groups[5]!.columns[3]!.meta_data!;
    const reader = {
      view: new DataView(ownArrayBuffer(bytes)),
      offset: Number(meta.data_page_offset),
    };
    const end = reader.offset + Number(meta.total_compressed_size);
    let pages = 0;
    while (reader.offset < end) {
      const header = parquetHeader(reader);
      const body = bytes.subarray(reader.offset, reader.offset + header.compressed_page_size);
      reader.offset += header.compressed_page_size;
      const at = rawFrameContent(body, header.uncompressed_page_size);
      expect(at).toBeDefined();
      expect(zstdDecompressSync(body)).toEqual(body.subarray(at!.start, at!.end));
      pages++;
    }
    expect(pages).toBe(8);
  });

  it("values that turn compressible are compressed again from the third row group after the change", async () => {
    const random = incompressibleRows(6_000);
    const rows = random.map((row, i) => (i < 3_000 ? row : { ...row, value: new Uint8Array(200) }));
    const sizes = valueChunkSizes(await encode(rows, 1_000));
    // Row groups 3 and 4 (compressible) are stored raw but for their first page: the bounded cost.
    expect(sizes[3]!.stored).toBeGreaterThan(sizes[3]!.plain * 0.8);
    expect(sizes[5]!.stored).toBeLessThan(sizes[5]!.plain * 0.05);
  });
});
