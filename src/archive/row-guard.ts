/**
 * What an encoder reports rows to on the way out: the snapshot order check
 * and the row digest.
 */
import { InvariantViolationError } from "../errors.js";
import { bufferView } from "../domain/record.js";
import { formatMicrosRfc3339 } from "../domain/time.js";
import { HIGH_WORD, LOW_WORD, timeWords, type RowPage } from "../ports/row-page.js";
import { RowDigest } from "./row-digest.js";

/** What an encoder reports each page of rows to, in order, before it encodes them. */
export interface RowGuard {
  acceptPage(page: RowPage): void;
}

export const NO_GUARD: RowGuard = { acceptPage: () => undefined };

/**
 * Checks the snapshot contract the payload relies on: rows arrive in strictly
 * increasing `(event_time, sort_key)` order (row-group statistics and range
 * reads depend on it), and each is fed to the row digest.
 */
export class RowStreamGuard implements RowGuard {
  /** The last row accepted: its time's words and its sort key, in a buffer of its own. */
  #high = 0;
  #low = 0;
  #key: Buffer = Buffer.allocUnsafe(64);
  #keyLength = -1;
  #rows = 0;
  readonly digest = new RowDigest();

  acceptPage(page: RowPage): void {
    const data = bufferView(page.data);
    const { low, high } = timeWords(page.micros);
    const { sortStarts, sortLengths } = page;
    // The previous row: the last page's kept copy, then this page's rows.
    let previousHigh = this.#high;
    let previousLow = this.#low;
    let previousKey: Buffer = this.#key;
    let previousStart = 0;
    let previousLength = this.#keyLength;
    for (let i = 0; i < page.count; i++) {
      const h = high[2 * i + HIGH_WORD]!;
      const l = low[2 * i + LOW_WORD]!;
      const start = sortStarts[i]!;
      const length = sortLengths[i]!;
      // Times a word at a time (the high word signed, the low unsigned), then the keys.
      const order =
        previousLength < 0
          ? -1
          : previousHigh !== h
            ? Math.sign(previousHigh - h)
            : previousLow !== l
              ? Math.sign(previousLow - l)
              : previousKey.compare(
                  data,
                  start,
                  start + length,
                  previousStart,
                  previousStart + previousLength,
                );
      if (order >= 0) {
        throw new InvariantViolationError(
          `snapshot row ${this.#rows} at ${formatMicrosRfc3339(page.micros[i]!)} is not after the ` +
            `previous row in (event_time, sort_key) order: the snapshot must be strictly ordered and free of duplicates`,
        );
      }
      previousHigh = h;
      previousLow = l;
      previousKey = data;
      previousStart = start;
      previousLength = length;
      this.#rows++;
    }
    if (page.count > 0) this.#keep(page, data, high, low);
    this.digest.addRanges(
      page.micros,
      data,
      page.sortStarts,
      page.sortLengths,
      data,
      page.valueStarts,
      page.valueLengths,
      page.count,
    );
  }

  /**
   * Keep a copy of the page's last row for the next page's first comparison,
   * so the page need not outlive this call.
   */
  #keep(page: RowPage, data: Buffer, high: Int32Array, low: Uint32Array): void {
    const last = page.count - 1;
    this.#high = high[2 * last + HIGH_WORD]!;
    this.#low = low[2 * last + LOW_WORD]!;
    const start = page.sortStarts[last]!;
    const length = page.sortLengths[last]!;
    if (length > this.#key.byteLength) this.#key = Buffer.allocUnsafe(length);
    data.copy(this.#key, 0, start, start + length);
    this.#keyLength = length;
  }
}
