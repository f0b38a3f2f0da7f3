/**
 * Verifying a Parquet payload on its columns: partition key, bucket bounds,
 * clustering order, each row group's event_time statistics and the row
 * digest, a row group at a time, without a record object per row.
 *
 * Invariant: it decodes only the layout the writer produces (data page v1,
 * ZSTD, event_time, sort_key and value PLAIN, partition_key
 * dictionary-encoded); for any other layout it returns undefined and the
 * caller verifies through the general decoder (reader.ts), so a payload is
 * never accepted by this path on a guess. It decodes the stored bytes on
 * its own terms, not through the writer's code: page headers are parsed by
 * hyparquet, pages are CRC-checked by the reader before they are decoded,
 * and the row digest it computes must equal the one the writer took from
 * the rows it was given, so a writer that encoded a byte wrongly is caught
 * here (external readers are held to the same files by the pyarrow and
 * DuckDB tests).
 *
 * Cost: a column chunk's pages are decompressed into one buffer, and values
 * are checked and hashed where they lie in it; a chunk whose pages
 * Zstandard stored verbatim (raw blocks) is read where it lies, without a
 * copy (see rawFrameContent).
 */
import { parquetHeader } from "hyparquet/src/column.js";
import { ArchiveIntegrityError } from "../../errors.js";
import { formatMicrosRfc3339, type EpochMicros } from "../../domain/time.js";
import type { ByteSource } from "../byte-sources.js";
import type { PayloadContent, PayloadExpectations } from "../payload-reader.js";
import { RowDigest } from "../row-digest.js";
import { ParquetPayloadReader, type RowGroupInfo } from "./reader.js";
import { PageDecompressor, rawFrameContent } from "./zstd-page.js";

/** Pages of one column chunk, decompressed: each page's bytes and stated value count. */
interface ChunkPages {
  readonly data: Buffer;
  readonly pages: readonly {
    start: number;
    end: number;
    values: number;
    dictionary: boolean;
    encoding: string;
  }[];
}

/** Returned by a decoder that meets a layout it does not handle. */
export const OTHER_LAYOUT = Symbol("other layout");

/**
 * {@link inspectPayload} for Parquet on columns; undefined when the file's
 * layout is not the writer's (the caller then decodes records).
 */
export async function verifyParquetColumns(
  source: ByteSource,
  expected: PayloadExpectations,
): Promise<PayloadContent | undefined> {
  const reader = await ParquetPayloadReader.open(source);
  const zstd = new PageDecompressor();
  try {
    const check = new ColumnChecks(source.name, expected);
    for (const group of reader.rowGroups) {
      if (group.rowCount === 0) continue;
      const chunk = (column: number) => reader.columnChunk(group.index, column);
      if ((await checkGroup(source.name, group, chunk, zstd, check)) === OTHER_LAYOUT)
        return undefined;
    }
    return check.finish();
  } finally {
    zstd.close();
  }
}

/** A row group's stored column chunk: its bytes, every page CRC-checked, and its codec. */
export type ChunkOf = (column: number) => Promise<{ bytes: Uint8Array; codec: string }>;

/**
 * Decode and check one row group's four column chunks, carrying order and
 * digest in `check`; returns the group's first and last event times.
 */
export async function checkGroup(
  name: string,
  group: RowGroupInfo,
  chunkOf: ChunkOf,
  zstd: PageDecompressor,
  check: ColumnChecks,
): Promise<{ first: EpochMicros; last: EpochMicros } | typeof OTHER_LAYOUT> {
  const chunks: ChunkPages[] = [];
  for (let column = 0; column < 4; column++) {
    const chunk = await decompressChunk(name, await chunkOf(column), zstd, group, column);
    if (chunk === OTHER_LAYOUT) return OTHER_LAYOUT;
    chunks.push(chunk);
  }
  const [keys, times, sortKeys, values] = chunks as [
    ChunkPages,
    ChunkPages,
    ChunkPages,
    ChunkPages,
  ];
  const fail = (problem: string): never => {
    throw new ArchiveIntegrityError(name, `row group ${group.index}: ${problem}`);
  };
  if ([times, sortKeys, values].some((c) => c.pages.some((page) => page.dictionary)))
    return OTHER_LAYOUT;
  if (!partitionKeysMatch(keys, group.rowCount, check.expected.partitionKey, fail))
    return OTHER_LAYOUT;
  const micros = eventTimes(name, times, group, fail);
  if (micros === OTHER_LAYOUT) return OTHER_LAYOUT;
  const sort = byteArrays(sortKeys, group.rowCount, "sort_key", fail);
  const value = byteArrays(values, group.rowCount, "value", fail);
  if (sort === OTHER_LAYOUT || value === OTHER_LAYOUT) return OTHER_LAYOUT;
  check.add(group, micros, sortKeys.data, sort, values.data, value);
  return { first: micros[0]!, last: micros[group.rowCount - 1]! };
}

async function decompressChunk(
  name: string,
  { bytes, codec }: { bytes: Uint8Array; codec: string },
  zstd: PageDecompressor,
  group: RowGroupInfo,
  column: number,
): Promise<ChunkPages | typeof OTHER_LAYOUT> {
  if (codec !== "ZSTD") return OTHER_LAYOUT;
  const headers: {
    body: Uint8Array;
    size: number;
    values: number;
    dictionary: boolean;
    encoding: string;
  }[] = [];
  const view = { view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), offset: 0 };
  while (view.offset < bytes.byteLength) {
    // The reader checked every page header and CRC of this range already.
    const header = parquetHeader(view);
    const size = header.compressed_page_size;
    const body = bytes.subarray(view.offset, view.offset + size);
    view.offset += size;
    const data = header.data_page_header;
    const dictionary = header.dictionary_page_header;
    if (header.type === "DATA_PAGE" && data !== undefined) {
      headers.push({
        body,
        size: header.uncompressed_page_size,
        values: data.num_values,
        dictionary: false,
        encoding: data.encoding,
      });
    } else if (header.type === "DICTIONARY_PAGE" && dictionary !== undefined) {
      headers.push({
        body,
        size: header.uncompressed_page_size,
        values: dictionary.num_values,
        dictionary: true,
        encoding: dictionary.encoding,
      });
    } else {
      return OTHER_LAYOUT;
    }
  }
  // Pages Zstandard stored verbatim are read where they lie in the chunk;
  // a chunk with any other page is decompressed whole.
  const raw = headers.map((h) => rawFrameContent(h.body, h.size));
  if (raw.every((r) => r !== undefined)) {
    const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const pages = headers.map((h, i) => {
      const offset = h.body.byteOffset - bytes.byteOffset;
      return {
        start: offset + raw[i]!.start,
        end: offset + raw[i]!.end,
        values: h.values,
        dictionary: h.dictionary,
        encoding: h.encoding,
      };
    });
    return { data, pages };
  }
  let data: Buffer;
  try {
    data = await zstd.decompress(headers);
  } catch (error) {
    throw new ArchiveIntegrityError(
      name,
      `the pages of column ${column} in row group ${group.index} do not decompress`,
      { cause: error },
    );
  }
  let start = 0;
  const pages = headers.map((h) => {
    const page = {
      start,
      end: start + h.size,
      values: h.values,
      dictionary: h.dictionary,
      encoding: h.encoding,
    };
    start += h.size;
    return page;
  });
  return { data, pages };
}

/**
 * partition_key: one PLAIN dictionary page, then data pages of dictionary
 * indices (bit width, then the RLE / bit-packed hybrid). Every row must
 * name a dictionary entry equal to `expected` (when given). False for a
 * layout this path does not decode.
 */
function partitionKeysMatch(
  chunk: ChunkPages,
  rows: number,
  expected: Uint8Array | undefined,
  fail: (problem: string) => never,
): boolean {
  const [dictionaryPage, ...dataPages] = chunk.pages;
  if (dictionaryPage?.dictionary !== true || dictionaryPage.encoding !== "PLAIN") return false;
  const entries = byteArrays(
    { data: chunk.data, pages: [dictionaryPage] },
    dictionaryPage.values,
    "partition_key dictionary",
    fail,
  );
  if (entries === OTHER_LAYOUT) return false;
  const matches = Array.from(
    { length: dictionaryPage.values },
    (_, i) =>
      expected === undefined ||
      (entries.lengths[i] === expected.byteLength &&
        chunk.data.compare(
          expected,
          0,
          expected.byteLength,
          entries.starts[i]!,
          entries.starts[i]! + entries.lengths[i]!,
        ) === 0),
  );
  let count = 0;
  for (const page of dataPages) {
    if (
      page.dictionary ||
      (page.encoding !== "RLE_DICTIONARY" && page.encoding !== "PLAIN_DICTIONARY")
    )
      return false;
    const data = chunk.data;
    let at = page.start;
    const width = data[at++] ?? fail("a partition_key page is empty");
    if (width > 32) fail(`a partition_key page states a bit width of ${width}`);
    const byteWidth = Math.ceil(width / 8);
    let left = page.values;
    const index = (i: number) => {
      if (!(i < matches.length))
        fail(`a partition_key index ${i} is past the ${matches.length}-entry dictionary`);
      if (!matches[i]) fail("a record has a partition key of another bucket");
    };
    while (left > 0) {
      let header = 0;
      let shift = 0;
      for (;;) {
        if (at >= page.end) fail("a partition_key page ends inside a run");
        const b = data[at++]!;
        header += (b & 0x7f) * 2 ** shift;
        shift += 7;
        if ((b & 0x80) === 0) break;
        if (shift > 35) fail("a partition_key run header is too long");
      }
      if (header % 2 === 0) {
        const run = Math.min(header / 2, left);
        if (at + byteWidth > page.end) fail("a partition_key run ends past its page");
        let value = 0;
        for (let k = 0; k < byteWidth; k++) value += data[at + k]! * 2 ** (8 * k);
        at += byteWidth;
        if (run > 0) index(value);
        left -= run;
      } else {
        const groups = (header - 1) / 2;
        const bytes = groups * width;
        if (at + bytes > page.end) fail("bit-packed partition_key indices end past their page");
        const n = Math.min(groups * 8, left);
        for (let k = 0; k < n; k++) {
          let value = 0;
          for (let bit = 0; bit < width; bit++) {
            const pos = k * width + bit;
            value |= ((data[at + (pos >> 3)]! >> (pos & 7)) & 1) << bit;
          }
          index(value >>> 0);
        }
        at += bytes;
        left -= n;
      }
    }
    count += page.values;
  }
  if (count !== rows) fail(`partition_key holds ${count} values for ${rows} rows`);
  return true;
}

/** event_time: PLAIN INT64 nanoseconds, whole microseconds. */
function eventTimes(
  name: string,
  chunk: ChunkPages,
  group: RowGroupInfo,
  fail: (problem: string) => never,
): BigInt64Array | typeof OTHER_LAYOUT {
  const nanos = new BigInt64Array(group.rowCount);
  const bytes = new Uint8Array(nanos.buffer);
  let count = 0;
  for (const page of chunk.pages) {
    if (page.dictionary || page.encoding !== "PLAIN") return OTHER_LAYOUT;
    if (page.end - page.start !== page.values * 8)
      fail(`an event_time page holds ${page.end - page.start} bytes for ${page.values} values`);
    if (count + page.values > group.rowCount)
      fail(`event_time holds more values than the group's ${group.rowCount} rows`);
    bytes.set(chunk.data.subarray(page.start, page.end), count * 8);
    count += page.values;
  }
  if (count !== group.rowCount) fail(`event_time holds ${count} values for ${group.rowCount} rows`);
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] === 0) {
    const view = new DataView(nanos.buffer);
    for (let i = 0; i < count; i++) nanos[i] = view.getBigInt64(i * 8, true);
  }
  const micros = new BigInt64Array(count);
  for (let i = 0; i < count; i++) {
    const ns = nanos[i]!;
    if (ns % 1000n !== 0n) {
      throw new ArchiveIntegrityError(
        name,
        `record ${group.rowStart + i} has event_time ${ns} ns, which is not a whole number of microseconds`,
      );
    }
    micros[i] = ns / 1000n;
  }
  return micros;
}

interface Ranges {
  readonly starts: Int32Array;
  readonly lengths: Int32Array;
}

/** PLAIN BYTE_ARRAY pages: a 4-byte little-endian length before each value. */
function byteArrays(
  chunk: ChunkPages,
  rows: number,
  name: string,
  fail: (problem: string) => never,
): Ranges | typeof OTHER_LAYOUT {
  const starts = new Int32Array(rows);
  const lengths = new Int32Array(rows);
  const data = chunk.data;
  let count = 0;
  for (const page of chunk.pages) {
    if (page.encoding !== "PLAIN") return OTHER_LAYOUT;
    if (count + page.values > rows) fail(`${name} holds more values than ${rows} rows`);
    let at = page.start;
    for (let i = 0; i < page.values; i++) {
      if (at + 4 > page.end) fail(`a ${name} page ends inside a value's length`);
      const length = data.readUInt32LE(at);
      at += 4;
      if (at + length > page.end) fail(`a ${name} value runs past its page`);
      starts[count] = at;
      lengths[count] = length;
      count++;
      at += length;
    }
    if (at !== page.end) fail(`a ${name} page holds ${page.end - at} bytes past its values`);
  }
  if (count !== rows) fail(`${name} holds ${count} values for ${rows} rows`);
  return { starts, lengths };
}

/** Bounds, order, statistics and the row digest, carried from row group to row group. */
export class ColumnChecks {
  readonly #digest = new RowDigest();
  #previousTime: EpochMicros | undefined;
  #previousSortKey = Buffer.alloc(0);

  constructor(
    private readonly name: string,
    readonly expected: PayloadExpectations,
  ) {}

  add(
    group: RowGroupInfo,
    micros: BigInt64Array,
    sortData: Buffer,
    sort: Ranges,
    valueData: Buffer,
    value: Ranges,
  ): void {
    const { start, end } = this.expected;
    const length = group.rowCount;
    const fail = (row: number, problem: string): never => {
      throw new ArchiveIntegrityError(this.name, `record ${group.rowStart + row} ${problem}`);
    };
    let previousTime = this.#previousTime;
    let previousStart = -1;
    let previousEnd = -1;
    for (let i = 0; i < length; i++) {
      const time = micros[i]!;
      if ((start !== undefined && time < start) || (end !== undefined && time >= end))
        fail(i, `has event_time ${formatMicrosRfc3339(time)} outside the bucket`);
      const from = sort.starts[i]!;
      const to = from + sort.lengths[i]!;
      if (previousTime !== undefined && time <= previousTime) {
        const order =
          time < previousTime
            ? 1
            : previousStart < 0
              ? this.#previousSortKey.compare(sortData, from, to)
              : sortData.compare(sortData, from, to, previousStart, previousEnd);
        if (order >= 0)
          fail(i, `is not after record ${group.rowStart + i - 1} in (event_time, sort_key) order`);
      }
      previousTime = time;
      previousStart = from;
      previousEnd = to;
    }
    // The footer's statistics decide which row groups a range read skips.
    if (group.minEventTime !== undefined && micros[0] !== group.minEventTime)
      fail(
        0,
        `has event_time ${micros[0]} µs, its row group states a minimum of ${group.minEventTime} µs`,
      );
    if (group.maxEventTime !== undefined && micros[length - 1] !== group.maxEventTime)
      fail(
        length - 1,
        `has event_time ${micros[length - 1]} µs, its row group states a maximum of ${group.maxEventTime} µs`,
      );
    this.#previousTime = previousTime;
    this.#previousSortKey = Buffer.from(sortData.subarray(previousStart, previousEnd));
    this.#digest.addRanges(
      micros,
      sortData,
      sort.starts,
      sort.lengths,
      valueData,
      value.starts,
      value.lengths,
      length,
    );
  }

  finish(): PayloadContent {
    return { rowCount: this.#digest.count, rowsDigest: this.#digest.digest() };
  }
}
