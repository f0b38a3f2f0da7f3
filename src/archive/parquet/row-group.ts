/**
 * The row group being filled by the native writer (native.ts): each column
 * PLAIN-encoded into page buffers, straight from a snapshot page's columns,
 * each page compressed on libuv's thread pool as soon as it is closed, and
 * the chunk statistics kept as the rows come.
 */
import { InvariantViolationError } from "../../errors.js";
import { DATA_PAGE_BYTES, DATA_PAGE_ROWS, eventTimeNanos } from "./layout.js";
import type { ColumnChunkInfo } from "./footer.js";
import type { PageCompressor } from "./page-compressor.js";
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
const TWO_32 = 2 ** 32;

/** A page waiting for its compressed body. */
export interface PendingPage {
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

  /** The value at `data[start, end)`, copied without a view (Buffer.copy takes ranges natively). */
  addBinary(data: Buffer, start: number, end: number): void {
    const length = end - start;
    const buffer = this.reserve(4 + length);
    buffer.writeUInt32LE(length, this.used);
    data.copy(buffer, this.used + 4, start, end);
    this.used += 4 + length;
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
export class RowGroupBuilder {
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

  /**
   * A row whose event time is `high * 2^32 + low` microseconds (see
   * row-page.ts), its key and value at `data[keyStart, keyEnd)` and
   * `data[valueStart, valueEnd)`.
   */
  add(
    high: number,
    low: number,
    data: Buffer,
    keyStart: number,
    keyEnd: number,
    valueStart: number,
    valueEnd: number,
  ): void {
    // Under 2^53 microseconds either way (years 1685 to 2255) a time is exact as a
    // double and within what TIMESTAMP(NANOS) holds; beyond, check it exactly.
    if (high >= 1 << 21 || high < -(1 << 21)) eventTimeNanos((BigInt(high) << 32n) | BigInt(low));
    // The nanoseconds' words: times 1000, the low word's carry added to the high one.
    const lowNanos = low * 1000;
    const carry = Math.floor(lowNanos / TWO_32);
    this.range.offer(high, low);
    this.minSortKey.offer(data, keyStart, keyEnd);
    this.maxSortKey.offer(data, keyStart, keyEnd);
    this.time.addInt64Words(high * 1000 + carry, lowNanos - carry * TWO_32);
    this.sortKeys.addBinary(data, keyStart, keyEnd);
    this.values.addBinary(data, valueStart, valueEnd);
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

export interface FilledRowGroup {
  readonly rows: number;
  readonly time: PendingPage[];
  readonly sortKeys: PendingPage[];
  readonly values: PendingPage[];
  readonly timeStats: ColumnChunkInfo["statistics"] & object;
  readonly sortKeyStats: ColumnChunkInfo["statistics"] & object;
}
