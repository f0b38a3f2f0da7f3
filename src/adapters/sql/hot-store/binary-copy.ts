/**
 * Snapshot pages through PostgreSQL's binary COPY: the statement with its
 * parameters written as literals (COPY takes none), and the decoder of the
 * rows it returns.
 */
import pg from "pg";
import { InvariantViolationError } from "../../../errors.js";
import { bufferView } from "../../../domain/record.js";
import { HIGH_WORD, LOW_WORD, timeWords, type RowPage } from "../../../ports/row-page.js";

/**
 * A statement's `$n` parameters as SQL literals, for COPY, which takes no
 * parameters. Only the kinds {@link SqlParams} produces are accepted: strings
 * (escaped by the driver), safe integers and bytes (as `decode(hex)`, which
 * no string setting can reinterpret).
 */
export function inlineParams(sql: string, values: readonly unknown[]): string {
  return sql.replace(/\$(\d+)/g, (_, n: string) => {
    const value = values[Number(n) - 1];
    if (typeof value === "string" && !value.includes("\0")) return pg.escapeLiteral(value);
    if (typeof value === "number" && Number.isSafeInteger(value)) return String(value);
    if (value instanceof Uint8Array) return `decode('${bufferView(value).toString("hex")}', 'hex')`;
    throw new TypeError(`parameter $${n} cannot be written as a literal`);
  });
}

const COPY_SIGNATURE = Buffer.from("PGCOPY\n\xff\r\n\0", "latin1");
/** 2000-01-01T00:00:00Z, PostgreSQL's binary timestamp epoch, in Unix microseconds. */
const PG_EPOCH_MICROS = 946_684_800_000_000;
const TWO_32 = 2 ** 32;
/** PostgreSQL microseconds within this of its epoch (years 1744 to 2255) are exact as doubles, and so is their Unix time. */
const EXACT_MICROS = Number.MAX_SAFE_INTEGER - PG_EPOCH_MICROS;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

/**
 * Rows of a snapshot page from the binary COPY of its query (columns
 * event_time, sort_key, value), in columns: keys and values stay where they
 * lie in `bytes`, which lives as long as the page; no field is copied and
 * no object is made per row.
 */
export function decodeBinarySnapshot(bytes: Buffer, limit: number): RowPage {
  const fail = (what: string): never => {
    throw new InvariantViolationError(`binary COPY of a snapshot page ${what}`);
  };
  const size = bytes.byteLength;
  if (size < 19 || !bytes.subarray(0, 11).equals(COPY_SIGNATURE)) fail("has no header");
  // DataView reads inline in optimized code and make no BigInt where a double is exact.
  const view = new DataView(bytes.buffer, bytes.byteOffset, size);
  let at = 19 + view.getUint32(15);
  // Room for the statement's LIMIT, or for as many rows as the bytes can hold
  // (2 + 4 + 8 + 4 + 4 bytes at least) if that is fewer; trimmed at the end.
  const room = Math.max(0, Math.min(limit, Math.floor((size - at) / 22)));
  const micros = new BigInt64Array(room);
  // Written a 32-bit word at a time: a BigInt per row costs more than the rest of the row.
  const { low: lowWords, high: highWords } = timeWords(micros);
  const sortStarts = new Int32Array(room);
  const sortLengths = new Int32Array(room);
  const valueStarts = new Int32Array(room);
  const valueLengths = new Int32Array(room);
  for (let count = 0; ; count++) {
    if (at + 2 > size) fail("is truncated");
    const fields = view.getInt16(at);
    if (fields === -1) {
      return {
        count,
        micros: micros.subarray(0, count),
        data: new Uint8Array(bytes.buffer, bytes.byteOffset, size),
        sortStarts: sortStarts.subarray(0, count),
        sortLengths: sortLengths.subarray(0, count),
        valueStarts: valueStarts.subarray(0, count),
        valueLengths: valueLengths.subarray(0, count),
      };
    }
    if (fields !== 3) fail(`has ${fields} columns, not 3`);
    if (count === room) fail(`has more than the ${limit} rows its statement asked for`);
    // The three length words and the timestamp: 2 + 4 + 8 + 4 bytes before the key.
    if (at + 18 > size) fail("is truncated");
    if (view.getInt32(at + 2) !== 8) fail("has a timestamp that is not 8 bytes");
    const high = view.getInt32(at + 6);
    const low = view.getUint32(at + 10);
    const sortLength = view.getInt32(at + 14);
    at += 18;
    if (sortLength < 0) fail("has a null column");
    if (at + sortLength + 4 > size) fail("is truncated");
    sortStarts[count] = at;
    sortLengths[count] = sortLength;
    at += sortLength;
    const valueLength = view.getInt32(at);
    at += 4;
    if (valueLength < 0) fail("has a null column");
    if (at + valueLength > size) fail("is truncated");
    valueStarts[count] = at;
    valueLengths[count] = valueLength;
    at += valueLength;
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
}

/** Event times a double cannot hold exactly, and the infinities, which no record has. */
function unixMicrosOfInt64(high: number, low: number, fail: (what: string) => never): bigint {
  const pgMicros = (BigInt(high) << 32n) | BigInt(low);
  if (pgMicros === INT64_MAX || pgMicros === INT64_MIN) fail("has an infinite event_time");
  const unix = pgMicros + BigInt(PG_EPOCH_MICROS);
  // PostgreSQL's last years (after 292277 AD) overflow 64 bits in Unix time; no record is there.
  if (unix > INT64_MAX) fail("has an event_time past what 64-bit Unix microseconds hold");
  return unix;
}
