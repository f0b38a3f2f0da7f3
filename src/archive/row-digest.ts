import { createHash } from "node:crypto";
import type { EpochMicros } from "../domain/time.js";
import { HIGH_WORD, LOW_WORD, timeWords } from "../ports/row-page.js";

/**
 * Canonical digest of a row sequence: for each row, the event time as a
 * signed 64-bit big-endian integer of microseconds, then the sort key and
 * the value, each preceded by its length as a 32-bit big-endian integer.
 * The partition key is the bucket's and is not part of it.
 */
export class RowDigest {
  static readonly #BUFFER_BYTES = 256 * 1024;
  readonly #hash = createHash("sha256");
  // Rows are framed into one buffer and hashed in large updates: four small
  // updates per row cost more than the hashing itself.
  readonly #buffer = Buffer.allocUnsafe(RowDigest.#BUFFER_BYTES);
  /** Over #buffer: DataView's setBigInt64 allocates nothing, Buffer's writeBigInt64BE four BigInts. */
  readonly #view = new DataView(
    this.#buffer.buffer,
    this.#buffer.byteOffset,
    RowDigest.#BUFFER_BYTES,
  );
  #used = 0;
  #count = 0;

  add(eventTime: EpochMicros, sortKey: Uint8Array, value: Uint8Array): void {
    const need = 16 + sortKey.byteLength + value.byteLength;
    if (this.#used + need > RowDigest.#BUFFER_BYTES) this.#flush();
    const buffer = this.#buffer;
    this.#view.setBigInt64(this.#used, eventTime, false);
    let at = buffer.writeUInt32BE(sortKey.byteLength, this.#used + 8);
    if (need > RowDigest.#BUFFER_BYTES) {
      this.#hash.update(buffer.subarray(0, at));
      this.#hash.update(sortKey);
      buffer.writeUInt32BE(value.byteLength, 0);
      this.#hash.update(buffer.subarray(0, 4));
      this.#hash.update(value);
      this.#used = 0;
    } else {
      buffer.set(sortKey, at);
      at = buffer.writeUInt32BE(value.byteLength, at + sortKey.byteLength);
      buffer.set(value, at);
      this.#used = at + value.byteLength;
    }
    this.#count++;
  }

  /**
   * Rows `[0, count)` framed as {@link add} frames them, where row i's sort
   * key is `sortData[sortStarts[i] .. sortStarts[i] + sortLengths[i])` and
   * likewise for values: the shape PLAIN-encoded Parquet pages decode to
   * (length-prefixed values), without a view per value.
   */
  addRanges(
    micros: BigInt64Array,
    sortData: Buffer,
    sortStarts: Int32Array,
    sortLengths: Int32Array,
    valueData: Buffer,
    valueStarts: Int32Array,
    valueLengths: Int32Array,
    count: number,
  ): void {
    const buffer = this.#buffer;
    const view = this.#view;
    // The times a 32-bit word at a time: reading micros[i] makes a BigInt.
    const { low, high } = timeWords(micros);
    const sameData = sortData === valueData;
    const dataView = new DataView(sortData.buffer, sortData.byteOffset, sortData.byteLength);
    for (let i = 0; i < count; i++) {
      const sortStart = sortStarts[i]!;
      const sortLength = sortLengths[i]!;
      const valueStart = valueStarts[i]!;
      const valueLength = valueLengths[i]!;
      const need = 16 + sortLength + valueLength;
      if (need > RowDigest.#BUFFER_BYTES) {
        this.add(
          micros[i]!,
          sortData.subarray(sortStart, sortStart + sortLength),
          valueData.subarray(valueStart, valueStart + valueLength),
        );
        continue;
      }
      if (this.#used + need > RowDigest.#BUFFER_BYTES) this.#flush();
      view.setInt32(this.#used, high[2 * i + HIGH_WORD]!, false);
      view.setUint32(this.#used + 4, low[2 * i + LOW_WORD]!, false);
      const framed = this.#used + 8;
      if (
        sameData &&
        valueStart === sortStart + sortLength + 4 &&
        sortStart >= 4 &&
        dataView.getUint32(sortStart - 4) === sortLength &&
        dataView.getUint32(valueStart - 4) === valueLength
      ) {
        // The row already lies framed in the data, each length big-endian
        // before its bytes (a snapshot page's binary DataRow fields): one copy.
        this.#used =
          framed + sortData.copy(buffer, framed, sortStart - 4, valueStart + valueLength);
      } else {
        let at = buffer.writeUInt32BE(sortLength, framed);
        at += sortData.copy(buffer, at, sortStart, sortStart + sortLength);
        at = buffer.writeUInt32BE(valueLength, at);
        at += valueData.copy(buffer, at, valueStart, valueStart + valueLength);
        this.#used = at;
      }
      this.#count++;
    }
  }

  #flush(): void {
    if (this.#used > 0) this.#hash.update(this.#buffer.subarray(0, this.#used));
    this.#used = 0;
  }

  get count(): number {
    return this.#count;
  }

  digest(): string {
    this.#flush();
    return this.#hash.digest("hex");
  }
}
