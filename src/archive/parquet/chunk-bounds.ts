/**
 * The bounds the native writer keeps per column chunk for its statistics:
 * the event-time range and the least and greatest sort key, without an
 * allocation per row.
 */
import { MAX_NANOS, MIN_NANOS } from "./layout.js";

/** Min and max of a column chunk, kept as values. */
export class TimeRange {
  min = MAX_NANOS;
  max = MIN_NANOS;
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

  offer(key: Uint8Array): void {
    if (this.#length >= 0 && compareWith(key, this.#bytes, this.#length) * this.sign <= 0) return;
    if (key.byteLength > this.#bytes.byteLength) this.#bytes = Buffer.allocUnsafe(key.byteLength);
    this.#bytes.set(key);
    this.#length = key.byteLength;
  }

  /** A copy of the bound; the bound starts over. */
  take(): Buffer {
    const bound = Buffer.from(this.#bytes.subarray(0, Math.max(0, this.#length)));
    this.#length = -1;
    return bound;
  }
}

/** Unsigned lexicographic order of `key` against the first `length` bytes of `bound`. */
function compareWith(key: Uint8Array, bound: Uint8Array, length: number): number {
  const common = Math.min(key.byteLength, length);
  for (let i = 0; i < common; i++) {
    const difference = key[i]! - bound[i]!;
    if (difference !== 0) return difference;
  }
  return key.byteLength - length;
}
