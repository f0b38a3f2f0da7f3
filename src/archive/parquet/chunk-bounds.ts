/**
 * The bounds the native writer keeps per column chunk for its statistics:
 * the event-time range and the least and greatest sort key, without an
 * allocation per row.
 */
import { eventTimeNanos } from "./layout.js";

/**
 * The least and greatest event time of a column chunk, offered as the two
 * 32-bit words of their microseconds (see row-page.ts), so no BigInt is made
 * per row; `take` gives them in nanoseconds.
 */
export class TimeRange {
  #minHigh = 0;
  #minLow = 0;
  #maxHigh = 0;
  #maxLow = 0;
  #empty = true;

  offer(high: number, low: number): void {
    if (this.#empty) {
      this.#minHigh = this.#maxHigh = high;
      this.#minLow = this.#maxLow = low;
      this.#empty = false;
      return;
    }
    if (high < this.#minHigh || (high === this.#minHigh && low < this.#minLow)) {
      this.#minHigh = high;
      this.#minLow = low;
    }
    if (high > this.#maxHigh || (high === this.#maxHigh && low > this.#maxLow)) {
      this.#maxHigh = high;
      this.#maxLow = low;
    }
  }

  /** The range in nanoseconds (undefined when nothing was offered); it starts over. */
  take(): { min: bigint; max: bigint } | undefined {
    if (this.#empty) return undefined;
    this.#empty = true;
    return {
      min: eventTimeNanos(micros(this.#minHigh, this.#minLow)),
      max: eventTimeNanos(micros(this.#maxHigh, this.#maxLow)),
    };
  }
}

function micros(high: number, low: number): bigint {
  return (BigInt(high) << 32n) | BigInt(low);
}

/**
 * The least (sign -1) or greatest (sign 1) sort key offered since the last
 * {@link take}, copied into a buffer of its own: a snapshot may reuse a
 * row's buffers once its page is consumed. No allocation per row: with keys
 * that grow row by row, every row is a new maximum.
 */
export class SortKeyBound {
  #bytes = Buffer.allocUnsafe(64);
  #length = -1;

  constructor(private readonly sign: 1 | -1) {}

  /** Offer the key at `data[start, end)`: compared and copied in place, no view made. */
  offer(data: Buffer, start: number, end: number): void {
    if (
      this.#length >= 0 &&
      compareWith(data, start, end, this.#bytes, this.#length) * this.sign <= 0
    )
      return;
    if (end - start > this.#bytes.byteLength) this.#bytes = Buffer.allocUnsafe(end - start);
    data.copy(this.#bytes, 0, start, end);
    this.#length = end - start;
  }

  /** A copy of the bound; the bound starts over. */
  take(): Buffer {
    const bound = Buffer.from(this.#bytes.subarray(0, Math.max(0, this.#length)));
    this.#length = -1;
    return bound;
  }
}

/**
 * Unsigned lexicographic order of `data[start, end)` against the first
 * `length` bytes of `bound`. A loop: sort keys are short, and a native
 * Buffer.compare per row cost more than the comparing (0.18 s per 1M rows).
 */
function compareWith(
  data: Uint8Array,
  start: number,
  end: number,
  bound: Uint8Array,
  length: number,
): number {
  const common = Math.min(end - start, length);
  for (let i = 0; i < common; i++) {
    const difference = data[start + i]! - bound[i]!;
    if (difference !== 0) return difference;
  }
  return end - start - length;
}
