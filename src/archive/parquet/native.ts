/**
 * A Parquet writer for the one schema payloads have (record schema v2,
 * see layout.ts), with ZSTD from Node's zlib: rows are PLAIN-encoded
 * straight into page buffers, each page is compressed on libuv's thread
 * pool while the next ones fill, and a row group's column chunks leave as
 * soon as their pages are compressed.
 *
 * Layout, as parquet-wasm wrote it (the second writer until issue 31): data page v1; partition_key
 * dictionary-encoded (one dictionary page with the bucket's key and
 * RLE-encoded indices); event_time, sort_key and value PLAIN; a page is
 * closed at a multiple of {@link DATA_PAGE_ROWS} rows once it holds
 * {@link DATA_PAGE_BYTES} (and at any row once it reaches
 * {@link MAX_PAGE_BYTES}, which bounds a page of very large values); chunk
 * statistics for event_time and sort_key; an offset index for every column
 * chunk after the last row group.
 *
 * A column whose pages Zstandard stored raw (no smaller compressed) two
 * row groups back compresses only the first page of a row group and writes
 * the others as raw ZSTD frames itself (PageColumn.storeRaw): the codec
 * stays ZSTD and the frames are those Zstandard writes for such pages.
 *
 * Memory is bounded by two row groups (the one filling and the one being
 * compressed) plus the offset indexes and footer entries, a few bytes per
 * page; the bytes are the same for the same rows and settings.
 */
import { InvariantViolationError } from "../../errors.js";
import { asRowPage, HIGH_WORD, LOW_WORD, timeWords, type RowBatch } from "../../ports/row-page.js";
import type { RowGuard } from "../row-guard.js";
import { announcementOf, type AnnouncedRowGroup } from "./announced-groups.js";
import {
  DATA_PAGE_BYTES,
  DATA_PAGE_ROWS,
  DEFAULT_ROW_GROUP_ROWS,
  eventTimeNanos,
  positiveInteger,
} from "./layout.js";
import {
  dataPageHeader,
  dictionaryPageHeader,
  Encoding,
  fileMetadata,
  offsetIndex,
  PhysicalType,
  type ColumnChunkInfo,
  type PageInfo,
  type RowGroupInfo,
} from "./footer.js";
import { PageCompressor } from "./page-compressor.js";
import { ThriftWriter } from "./thrift.js";
import { SortKeyBound, TimeRange } from "./chunk-bounds.js";
import {
  MAX_RAW_BLOCK,
  RAW_FRAME_OVERHEAD,
  RAW_SLAB_BYTES,
  rawFrame,
  rawFrameContent,
} from "./zstd-page.js";

/** A page holding this much is closed whatever its row count. */
export const MAX_PAGE_BYTES = 1024 * 1024;
/** Pages of a partition_key data page: its indices take bits, so it is cut by rows only. */
const KEY_PAGE_ROWS = 20_000;

const MAGIC = Buffer.from("PAR1", "latin1");
const TWO_32 = 2 ** 32;

/** A page waiting for its compressed body. */
interface PendingPage {
  readonly rows: number;
  readonly firstRow: number;
  /** Uncompressed size of the body. */
  readonly size: number;
  readonly compressed: Promise<Buffer>;
}

interface PageStats {
  compressed: number;
  raw: number;
}

/** One PLAIN-encoded column of the row group being filled, cut into pages. */
class PageColumn {
  constructor(private readonly zstd: PageCompressor) {}

  /**
   * True while the column's pages come out of Zstandard no smaller than
   * they went in (random, encrypted or already compressed values): then
   * only the first page of a row group is compressed, as a probe, and the
   * others are stored as raw frames, which is what Zstandard would have
   * written for them, without the work of trying. Set from row groups
   * already compressed (see {@link RowGroupBuilder.take}), never from
   * pages in flight, so the bytes do not depend on thread timing.
   */
  storeRaw = false;
  /** Of the current row group's pages compressed so far: how many, and how many came out raw. */
  #stats: PageStats = { compressed: 0, raw: 0 };
  /** The stats of the row group before the last one taken: complete once that group is written. */
  #previousStats: PageStats | undefined;
  #slab = Buffer.allocUnsafe(0);
  #slabUsed = 0;

  #buffer: Buffer = Buffer.allocUnsafe(DATA_PAGE_BYTES * 2);
  /** Over #buffer: DataView's setBigInt64 allocates nothing, Buffer's writeBigInt64LE four BigInts. */
  #view = dataView(this.#buffer);
  readonly #free: Buffer[] = [];
  used = 0;
  rows = 0;
  firstRow = 0;
  pages: PendingPage[] = [];

  reserve(bytes: number): Buffer {
    if (this.used + bytes > this.#buffer.byteLength) {
      const grown = Buffer.allocUnsafe(Math.max(this.used + bytes, this.#buffer.byteLength * 2));
      this.#buffer.copy(grown, 0, 0, this.used);
      this.#buffer = grown;
      this.#view = dataView(grown);
    }
    return this.#buffer;
  }

  addBinary(bytes: Uint8Array): void {
    const buffer = this.reserve(4 + bytes.byteLength);
    buffer.writeUInt32LE(bytes.byteLength, this.used);
    buffer.set(bytes, this.used + 4);
    this.used += 4 + bytes.byteLength;
    this.rows++;
  }

  /** An int64 given as its words (the high one signed): no BigInt per row. */
  addInt64Words(high: number, low: number): void {
    this.reserve(8);
    this.#view.setUint32(this.used, low, true);
    this.#view.setInt32(this.used + 4, high, true);
    this.used += 8;
    this.rows++;
  }

  /** Close the page being filled (if it holds rows) and start compressing it. */
  close(): void {
    if (this.rows === 0) return;
    if (this.storeRaw && this.pages.length > 0 && this.used <= MAX_RAW_BLOCK) {
      if (this.#slabUsed + this.used + RAW_FRAME_OVERHEAD > this.#slab.byteLength) {
        this.#slab = Buffer.allocUnsafe(Math.max(RAW_SLAB_BYTES, this.used + RAW_FRAME_OVERHEAD));
        this.#slabUsed = 0;
      }
      const start = this.#slabUsed;
      this.#slabUsed = rawFrame(this.#buffer.subarray(0, this.used), this.#slab, start);
      const frame = this.#slab.subarray(start, this.#slabUsed);
      this.pages.push({
        rows: this.rows,
        firstRow: this.firstRow,
        size: this.used,
        compressed: Promise.resolve(frame),
      });
      this.firstRow += this.rows;
      this.used = 0;
      this.rows = 0;
      return;
    }
    // The compressor reads the buffer on another thread: the column goes on
    // with another one, and gets this one back once the page is compressed.
    // Reusing them spares an allocation per page, which V8 counts as
    // external memory and answers with full garbage collections.
    const full = this.#buffer;
    const size = this.used;
    const compressed = this.zstd.compress(full.subarray(0, size));
    const stats = this.#stats;
    compressed.then(
      (frame) => {
        this.#free.push(full);
        stats.compressed++;
        if (rawFrameContent(frame, size) !== undefined) stats.raw++;
      },
      () => undefined,
    );
    this.pages.push({ rows: this.rows, firstRow: this.firstRow, size, compressed });
    this.#buffer = this.#free.pop() ?? Buffer.allocUnsafe(DATA_PAGE_BYTES * 2);
    this.#view = dataView(this.#buffer);
    this.firstRow += this.rows;
    this.used = 0;
    this.rows = 0;
  }

  /**
   * The row group's pages; the column starts empty for the next one. The
   * caller has written every row group before this one, so the stats of
   * the one before it are complete: their pages all raw decides
   * {@link storeRaw} for the next row group.
   */
  take(): PendingPage[] {
    this.close();
    const pages = this.pages;
    this.pages = [];
    this.firstRow = 0;
    const before = this.#previousStats;
    this.storeRaw =
      before !== undefined && before.compressed > 0 && before.raw === before.compressed;
    this.#previousStats = this.#stats;
    this.#stats = { compressed: 0, raw: 0 };
    return pages;
  }
}

function dataView(buffer: Buffer): DataView {
  return new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

/** The row group being filled. */
class RowGroupBuilder {
  readonly time: PageColumn;
  readonly sortKeys: PageColumn;
  readonly values: PageColumn;
  rows = 0;
  readonly range = new TimeRange();
  readonly minSortKey = new SortKeyBound(-1);
  readonly maxSortKey = new SortKeyBound(1);

  constructor(zstd: PageCompressor) {
    this.time = new PageColumn(zstd);
    this.sortKeys = new PageColumn(zstd);
    this.values = new PageColumn(zstd);
  }

  /** A row whose event time is `high * 2^32 + low` microseconds (see row-page.ts). */
  add(high: number, low: number, key: Uint8Array, value: Uint8Array): void {
    // Under 2^53 microseconds either way (years 1685 to 2255) a time is exact as a
    // double and within what TIMESTAMP(NANOS) holds; beyond, check it exactly.
    if (high >= 1 << 21 || high < -(1 << 21)) eventTimeNanos((BigInt(high) << 32n) | BigInt(low));
    // The nanoseconds' words: times 1000, the low word's carry added to the high one.
    const lowNanos = low * 1000;
    const carry = Math.floor(lowNanos / TWO_32);
    this.range.offer(high, low);
    this.minSortKey.offer(key);
    this.maxSortKey.offer(key);
    this.time.addInt64Words(high * 1000 + carry, lowNanos - carry * TWO_32);
    this.sortKeys.addBinary(key);
    this.values.addBinary(value);
    this.rows++;
    // Three calls rather than a loop over a new array: this runs once per row.
    const limit = this.rows % DATA_PAGE_ROWS === 0 ? DATA_PAGE_BYTES : MAX_PAGE_BYTES;
    if (this.time.used >= limit) this.time.close();
    if (this.sortKeys.used >= limit) this.sortKeys.close();
    if (this.values.used >= limit) this.values.close();
  }

  /** Everything the row group's chunks need once compressed; the builder starts over. */
  take(): FilledRowGroup {
    const int64 = (value: bigint) => {
      const bytes = Buffer.allocUnsafe(8);
      bytes.writeBigInt64LE(value);
      return bytes;
    };
    const range = this.range.take();
    if (range === undefined)
      throw new InvariantViolationError("a row group was taken with no rows");
    const filled: FilledRowGroup = {
      rows: this.rows,
      time: this.time.take(),
      sortKeys: this.sortKeys.take(),
      values: this.values.take(),
      timeStats: { min: int64(range.min), max: int64(range.max), legacy: true },
      sortKeyStats: {
        min: this.minSortKey.take(),
        max: this.maxSortKey.take(),
        legacy: false,
      },
    };
    this.rows = 0;
    return filled;
  }
}

interface FilledRowGroup {
  readonly rows: number;
  readonly time: PendingPage[];
  readonly sortKeys: PendingPage[];
  readonly values: PendingPage[];
  readonly timeStats: ColumnChunkInfo["statistics"] & object;
  readonly sortKeyStats: ColumnChunkInfo["statistics"] & object;
}

/** RLE/bit-packed hybrid indices of `rows` rows that all use dictionary entry 0: bit width 0, one RLE run. */
function keyIndices(rows: number): Buffer {
  const out = [0];
  let header = rows * 2;
  while (header >= 0x80) {
    out.push((header & 0x7f) | 0x80);
    header = Math.floor(header / 128);
  }
  out.push(header);
  return Buffer.from(out);
}

/**
 * Writes the file: the magic, then row groups as they are finished, then
 * the offset indexes and the footer. `offset` is where the next byte goes.
 */
class FileAssembler {
  offset = MAGIC.byteLength;
  readonly groups: RowGroupInfo[] = [];
  readonly #header = new ThriftWriter();

  constructor(
    private readonly partitionKey: Uint8Array,
    private readonly zstd: PageCompressor,
  ) {}

  /** A row group's bytes, once its pages are compressed. */
  async rowGroup(filled: FilledRowGroup): Promise<Buffer[]> {
    const out: Buffer[] = [];
    const page = (header: Buffer, body: Buffer, uncompressed: number, firstRow: number) => {
      const info: PageInfo = {
        offset: this.offset,
        size: header.byteLength + body.byteLength,
        uncompressedSize: header.byteLength + uncompressed,
        firstRow,
      };
      out.push(header, body);
      this.offset += info.size;
      return info;
    };
    const key = Buffer.allocUnsafe(4 + this.partitionKey.byteLength);
    key.writeUInt32LE(this.partitionKey.byteLength);
    key.set(this.partitionKey, 4);
    const keyPages = [];
    for (let first = 0; first < filled.rows; first += KEY_PAGE_ROWS) {
      const rows = Math.min(KEY_PAGE_ROWS, filled.rows - first);
      const body = keyIndices(rows);
      keyPages.push({
        rows,
        firstRow: first,
        size: body.byteLength,
        compressed: this.zstd.compress(body),
      });
    }
    const dictionaryCompressed = await this.zstd.compress(key);
    const dictionaryPage = page(
      dictionaryPageHeader(
        { compressed: dictionaryCompressed, uncompressedSize: key.byteLength },
        1,
        this.#header,
      ),
      dictionaryCompressed,
      key.byteLength,
      0,
    );
    const chunk = async (encoding: number, pages: readonly PendingPage[]): Promise<PageInfo[]> => {
      const infos: PageInfo[] = [];
      for (const pending of pages) {
        const body = await pending.compressed;
        const header = dataPageHeader(
          { compressed: body, uncompressedSize: pending.size },
          pending.rows,
          encoding,
          this.#header,
        );
        infos.push(page(header, body, pending.size, pending.firstRow));
      }
      return infos;
    };
    const BINARY = PhysicalType.BYTE_ARRAY;
    const columns: ColumnChunkInfo[] = [
      {
        type: BINARY,
        name: "partition_key",
        dictionaryPage,
        dataPages: await chunk(Encoding.RLE_DICTIONARY, keyPages),
        numValues: filled.rows,
      },
      {
        type: PhysicalType.INT64,
        name: "event_time",
        dataPages: await chunk(Encoding.PLAIN, filled.time),
        numValues: filled.rows,
        statistics: filled.timeStats,
      },
      {
        type: BINARY,
        name: "sort_key",
        dataPages: await chunk(Encoding.PLAIN, filled.sortKeys),
        numValues: filled.rows,
        statistics: filled.sortKeyStats,
      },
      {
        type: BINARY,
        name: "value",
        dataPages: await chunk(Encoding.PLAIN, filled.values),
        numValues: filled.rows,
      },
    ];
    this.groups.push({ columns, numRows: filled.rows });
    return out;
  }

  /** Offset indexes, footer, its length and the closing magic. */
  finish(): Buffer[] {
    const out: Buffer[] = [];
    const writer = new ThriftWriter(1024);
    for (const group of this.groups) {
      for (const column of group.columns) {
        const bytes = offsetIndex(column.dataPages, writer);
        column.offsetIndex = { offset: this.offset, length: bytes.byteLength };
        this.offset += bytes.byteLength;
        out.push(bytes);
      }
    }
    const footer = fileMetadata(this.groups);
    const length = Buffer.allocUnsafe(4);
    length.writeUInt32LE(footer.byteLength);
    out.push(footer, length, MAGIC);
    return out;
  }
}

/**
 * Encode pages of rows as an envelope Parquet file, yielding its bytes in
 * order (a row group's worth at a time). Rows go through `guard` (order
 * check and row digest) as they are encoded.
 */
export async function* writeNativeParquet(
  partitionKey: Uint8Array,
  pages: AsyncIterable<RowBatch>,
  guard: RowGuard,
  options: {
    readonly rowGroupRows?: number;
    /**
     * Called once a row group's last byte was taken from the iterator, and
     * awaited before the writer goes on (so the consumer may flush it).
     */
    readonly onRowGroup?: (group: AnnouncedRowGroup) => Promise<void> | void;
  },
): AsyncIterable<Uint8Array> {
  const rowGroupRows = positiveInteger(
    options.rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS,
    "rowGroupRows",
  );
  const zstd = new PageCompressor();
  const file = new FileAssembler(partitionKey, zstd);
  const builder = new RowGroupBuilder(zstd);
  yield MAGIC;
  // The row group before the one filling: its pages compress on the thread
  // pool while this one fills, and it leaves before the next is started.
  let previous: Promise<Buffer[]> | undefined;
  const source = pages[Symbol.asyncIterator]();
  // The next snapshot page is requested as soon as the current one arrives,
  // so the database produces it while this one is encoded. A failed
  // prefetch is observed (and rethrown) when its page is due.
  const prefetch = () => {
    const next = source.next();
    next.catch(() => undefined);
    return next;
  };
  // A row group's bytes, then its announcement (the last group the assembler finished).
  async function* announced(bytes: Buffer[]): AsyncIterable<Buffer> {
    yield* bytes;
    const group = file.groups[file.groups.length - 1];
    if (options.onRowGroup !== undefined && group !== undefined)
      await options.onRowGroup(announcementOf(group));
  }
  let completed = false;
  try {
    let next = prefetch();
    for (;;) {
      const result = await next;
      if (result.done === true) break;
      next = prefetch();
      const page = asRowPage(result.value);
      guard.acceptPage(page);
      const { data, sortStarts, sortLengths, valueStarts, valueLengths } = page;
      const { low, high } = timeWords(page.micros);
      for (let i = 0; i < page.count; i++) {
        const sortStart = sortStarts[i]!;
        const valueStart = valueStarts[i]!;
        builder.add(
          high[2 * i + HIGH_WORD]!,
          low[2 * i + LOW_WORD]!,
          data.subarray(sortStart, sortStart + sortLengths[i]!),
          data.subarray(valueStart, valueStart + valueLengths[i]!),
        );
        if (builder.rows === rowGroupRows) {
          if (previous !== undefined) yield* announced(await previous);
          previous = file.rowGroup(builder.take());
          previous.catch(() => undefined);
        }
      }
    }
    completed = true;
    if (previous !== undefined) yield* announced(await previous);
    if (builder.rows > 0) yield* announced(await file.rowGroup(builder.take()));
    yield* file.finish();
  } finally {
    zstd.close();
    if (!completed) await source.return?.();
  }
}
