/**
 * What an encoder reports rows to on the way out: the snapshot order check
 * and the row digest.
 */
import { InvariantViolationError } from "../errors.js";
import { compareBytes } from "../domain/record.js";
import { formatMicrosRfc3339 } from "../domain/time.js";
import type { BucketRow } from "../ports/hot-store.js";
import type { BinaryColumn } from "./envelope.js";
import { RowDigest } from "./row-digest.js";

/**
 * What an encoder reports rows to. `accept` takes one row for the order
 * check and the digest; an encoder that builds columns may instead call
 * `checkOrder` per row and hand the digest whole columns through
 * `digestColumns`, in the same row order.
 */
export interface RowGuard {
  accept(row: BucketRow): void;
  checkOrder(row: BucketRow): void;
  digestColumns(
    micros: BigInt64Array,
    sortKeys: BinaryColumn,
    values: BinaryColumn,
    rows: number,
  ): void;
}

export const NO_GUARD: RowGuard = {
  accept: () => undefined,
  checkOrder: () => undefined,
  digestColumns: () => undefined,
};

/**
 * Checks the snapshot contract the payload relies on: rows arrive in strictly
 * increasing `(event_time, sort_key)` order (row-group statistics and range
 * reads depend on it), and each is fed to the row digest.
 */
export class RowStreamGuard implements RowGuard {
  #previous: BucketRow | undefined;
  #rows = 0;
  readonly digest = new RowDigest();

  accept(row: BucketRow): void {
    this.checkOrder(row);
    this.digest.add(row.eventTime, row.sortKey, row.value);
  }

  checkOrder(row: BucketRow): void {
    const previous = this.#previous;
    if (previous !== undefined) {
      const order =
        previous.eventTime !== row.eventTime
          ? previous.eventTime < row.eventTime
            ? -1
            : 1
          : compareBytes(previous.sortKey, row.sortKey);
      if (order >= 0) {
        throw new InvariantViolationError(
          `snapshot row ${this.#rows} at ${formatMicrosRfc3339(row.eventTime)} is not after the ` +
            `previous row in (event_time, sort_key) order: the snapshot must be strictly ordered and free of duplicates`,
        );
      }
    }
    this.#previous = row;
    this.#rows++;
  }

  digestColumns(
    micros: BigInt64Array,
    sortKeys: BinaryColumn,
    values: BinaryColumn,
    rows: number,
  ): void {
    this.digest.addColumns(micros, sortKeys, values, 0, rows);
  }
}
