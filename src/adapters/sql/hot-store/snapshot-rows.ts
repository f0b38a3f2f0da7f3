/**
 * The decoder of a snapshot page's binary rows (columns event_time,
 * sort_key, value; wire-rows.ts), into the columns of a {@link RowPage}.
 */
import { InvariantViolationError } from "../../../errors.js";
import { HIGH_WORD, LOW_WORD, timeWords, type RowPage } from "../../../ports/row-page.js";
import type { BinaryRows } from "../wire-rows.js";

/** 2000-01-01T00:00:00Z, PostgreSQL's binary timestamp epoch, in Unix microseconds. */
const PG_EPOCH_MICROS = 946_684_800_000_000;
const TWO_32 = 2 ** 32;
/** PostgreSQL microseconds within this of its epoch (years 1744 to 2255) are exact as doubles, and so is their Unix time. */
const EXACT_MICROS = Number.MAX_SAFE_INTEGER - PG_EPOCH_MICROS;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);
const DATA_ROW = 0x44; // D

/**
 * Rows of a snapshot page, in columns: keys and values stay where they lie
 * in `rows.bytes`, which lives as long as the page; no field is copied and
 * no object is made per row. Each DataRow is its type byte and length, a
 * field count, then each field's length and bytes (a timestamp is 8 bytes of
 * microseconds since 2000); the page must hold exactly `rows.rows` of them,
 * and at most `limit` (its statement's LIMIT).
 */
export function decodeSnapshotRows({ bytes, rows }: BinaryRows, limit: number): RowPage {
  const fail = (what: string): never => {
    throw new InvariantViolationError(`the binary rows of a snapshot page ${what}`);
  };
  if (rows > limit) fail(`are ${rows}, more than the ${limit} its statement asked for`);
  const size = bytes.byteLength;
  // DataView reads inline in optimized code and make no BigInt where a double is exact.
  const view = new DataView(bytes.buffer, bytes.byteOffset, size);
  const micros = new BigInt64Array(rows);
  // Written a 32-bit word at a time: a BigInt per row costs more than the rest of the row.
  const { low: lowWords, high: highWords } = timeWords(micros);
  const sortStarts = new Int32Array(rows);
  const sortLengths = new Int32Array(rows);
  const valueStarts = new Int32Array(rows);
  const valueLengths = new Int32Array(rows);
  let at = 0;
  for (let count = 0; count < rows; count++) {
    // The message's type and length, the field count, the timestamp's length
    // and bytes, the key's length: 1 + 4 + 2 + 4 + 8 + 4 bytes before the key.
    if (at + 23 > size) fail("are truncated");
    if (bytes[at] !== DATA_ROW) fail(`have a message of type ${bytes[at]} among them`);
    const messageEnd = at + 1 + view.getUint32(at + 1);
    const fields = view.getInt16(at + 5);
    if (fields !== 3) fail(`have ${fields} columns, not 3`);
    if (view.getInt32(at + 7) !== 8) fail("have a timestamp that is not 8 bytes");
    const high = view.getInt32(at + 11);
    const low = view.getUint32(at + 15);
    const sortLength = view.getInt32(at + 19);
    at += 23;
    if (sortLength < 0) fail("have a null column");
    if (at + sortLength + 4 > size) fail("are truncated");
    sortStarts[count] = at;
    sortLengths[count] = sortLength;
    at += sortLength;
    const valueLength = view.getInt32(at);
    at += 4;
    if (valueLength < 0) fail("have a null column");
    if (at + valueLength > size) fail("are truncated");
    valueStarts[count] = at;
    valueLengths[count] = valueLength;
    at += valueLength;
    if (at !== messageEnd) fail("have a row whose fields do not fill its message");
    const pgMicros = high * TWO_32 + low;
    if (pgMicros > -EXACT_MICROS && pgMicros < EXACT_MICROS) {
      const unix = pgMicros + PG_EPOCH_MICROS;
      const unixHigh = Math.floor(unix / TWO_32);
      highWords[2 * count + HIGH_WORD] = unixHigh;
      lowWords[2 * count + LOW_WORD] = unix - unixHigh * TWO_32;
    } else {
      micros[count] = unixMicrosOfInt64(high, low, fail);
    }
  }
  if (at !== size) fail(`hold ${size - at} bytes after their ${rows} rows`);
  return {
    count: rows,
    micros,
    data: new Uint8Array(bytes.buffer, bytes.byteOffset, size),
    sortStarts,
    sortLengths,
    valueStarts,
    valueLengths,
  };
}

/** Event times a double cannot hold exactly, and the infinities, which no record has. */
function unixMicrosOfInt64(high: number, low: number, fail: (what: string) => never): bigint {
  const pgMicros = (BigInt(high) << 32n) | BigInt(low);
  if (pgMicros === INT64_MAX || pgMicros === INT64_MIN) fail("have an infinite event_time");
  const unix = pgMicros + BigInt(PG_EPOCH_MICROS);
  // PostgreSQL's last years (after 292277 AD) overflow 64 bits in Unix time; no record is there.
  if (unix > INT64_MAX) fail("have an event_time past what 64-bit Unix microseconds hold");
  return unix;
}
