/**
 * Rows of a snapshot page in columns: the event times in one array, the
 * sort keys and values where they lie in one buffer, located by start and
 * length arrays. A page of 5,000 rows is then seven objects, not an object
 * and two views per row: those lived as long as the page, so every young
 * generation collection on the export's main thread copied them (issue 31:
 * 0.2 s of 2.5 s per 1M rows went to such collections).
 *
 * The shape is the one PLAIN-encoded Parquet pages decode to, so
 * RowDigest.addRanges frames either without a view per value.
 */
import type { BucketRow } from "./hot-store-types.js";

export interface RowPage {
  readonly count: number;
  /** Event times, Unix microseconds: row i's is `micros[i]`. */
  readonly micros: BigInt64Array;
  /**
   * Where sort keys and values lie: a plain Uint8Array, whose subarray()
   * costs less than a Buffer's (readers that want a Buffer view it once).
   */
  readonly data: Uint8Array;
  /** Row i's sort key is `data[sortStarts[i], sortStarts[i] + sortLengths[i])`. */
  readonly sortStarts: Int32Array;
  readonly sortLengths: Int32Array;
  /** Row i's value, likewise. */
  readonly valueStarts: Int32Array;
  readonly valueLengths: Int32Array;
}

/** Whether this machine stores an int64's low word first (every platform Node runs on but s390x). */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/** Where an int64's low and high 32-bit words lie among the words of a BigInt64Array. */
export const LOW_WORD = LITTLE_ENDIAN ? 0 : 1;
export const HIGH_WORD = 1 - LOW_WORD;

/**
 * The event times as 32-bit words, read without making a BigInt per row:
 * row i's time is `high[2i + HIGH_WORD] * 2^32 + low[2i + LOW_WORD]`. Both
 * are views of the same memory as `micros`.
 */
export function timeWords(micros: BigInt64Array): { low: Uint32Array; high: Int32Array } {
  return {
    low: new Uint32Array(micros.buffer, micros.byteOffset, micros.length * 2),
    high: new Int32Array(micros.buffer, micros.byteOffset, micros.length * 2),
  };
}

/** A source of rows for the payload encoders: a snapshot page, or rows one object each. */
export type RowBatch = RowPage | readonly BucketRow[];

export const EMPTY_ROW_PAGE: RowPage = rowPageOf([]);

/** Rows one object each, packed into a page (a copy of their bytes). */
export function rowPageOf(rows: readonly BucketRow[]): RowPage {
  const count = rows.length;
  let bytes = 0;
  for (const row of rows) bytes += row.sortKey.byteLength + row.value.byteLength;
  const data = new Uint8Array(bytes);
  const page = {
    count,
    micros: new BigInt64Array(count),
    data,
    sortStarts: new Int32Array(count),
    sortLengths: new Int32Array(count),
    valueStarts: new Int32Array(count),
    valueLengths: new Int32Array(count),
  };
  let at = 0;
  for (let i = 0; i < count; i++) {
    const { eventTime, sortKey, value } = rows[i]!;
    page.micros[i] = eventTime;
    page.sortStarts[i] = at;
    page.sortLengths[i] = sortKey.byteLength;
    data.set(sortKey, at);
    at += sortKey.byteLength;
    page.valueStarts[i] = at;
    page.valueLengths[i] = value.byteLength;
    data.set(value, at);
    at += value.byteLength;
  }
  return page;
}

/** A batch as a page: a page as it is, rows packed. */
export function asRowPage(batch: RowBatch): RowPage {
  return isRowPage(batch) ? batch : rowPageOf(batch);
}

function isRowPage(batch: RowBatch): batch is RowPage {
  return !Array.isArray(batch);
}

/** Row i of a page, its key and value views into the page's buffer. */
export function rowAt(page: RowPage, i: number): BucketRow {
  return {
    eventTime: page.micros[i]!,
    sortKey: sortKeyAt(page, i),
    value: page.data.subarray(page.valueStarts[i]!, page.valueStarts[i]! + page.valueLengths[i]!),
  };
}

export function sortKeyAt(page: RowPage, i: number): Uint8Array {
  return page.data.subarray(page.sortStarts[i]!, page.sortStarts[i]! + page.sortLengths[i]!);
}

/** Every row of a page, one object each (for tests and small pages). */
export function rowsOf(page: RowPage): BucketRow[] {
  return Array.from({ length: page.count }, (_, i) => rowAt(page, i));
}

/** Rows `[from, to)` of a page, sharing its buffers. */
export function slicePage(page: RowPage, from: number, to: number): RowPage {
  if (from === 0 && to === page.count) return page;
  return {
    count: to - from,
    micros: page.micros.subarray(from, to),
    data: page.data,
    sortStarts: page.sortStarts.subarray(from, to),
    sortLengths: page.sortLengths.subarray(from, to),
    valueStarts: page.valueStarts.subarray(from, to),
    valueLengths: page.valueLengths.subarray(from, to),
  };
}
