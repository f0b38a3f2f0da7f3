/**
 * Snapshot pages through PostgreSQL's binary COPY: the statement with its
 * parameters written as literals (COPY takes none), and the decoder of the
 * rows it returns.
 */
import pg from "pg";
import { InvariantViolationError } from "../../../errors.js";
import { bufferView } from "../../../domain/record.js";
import type { BucketRow } from "../../../ports/hot-store.js";

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
 * event_time, sort_key, value). Keys and values are views into `bytes`,
 * which lives as long as the page: no field is copied.
 */
export function decodeBinarySnapshot(bytes: Buffer): BucketRow[] {
  const fail = (what: string): never => {
    throw new InvariantViolationError(`binary COPY of a snapshot page ${what}`);
  };
  const size = bytes.byteLength;
  if (size < 19 || !bytes.subarray(0, 11).equals(COPY_SIGNATURE)) fail("has no header");
  // DataView reads inline in optimized code and make no BigInt where a double is exact.
  const view = new DataView(bytes.buffer, bytes.byteOffset, size);
  const base = bytes.byteOffset;
  const buffer = bytes.buffer;
  let at = 19 + view.getUint32(15);
  const rows: BucketRow[] = [];
  for (;;) {
    if (at + 2 > size) fail("is truncated");
    const fields = view.getInt16(at);
    if (fields === -1) return rows;
    if (fields !== 3) fail(`has ${fields} columns, not 3`);
    // The three length words and the timestamp: 2 + 4 + 8 + 4 bytes before the key.
    if (at + 18 > size) fail("is truncated");
    if (view.getInt32(at + 2) !== 8) fail("has a timestamp that is not 8 bytes");
    const high = view.getInt32(at + 6);
    const low = view.getUint32(at + 10);
    const sortLength = view.getInt32(at + 14);
    at += 18;
    if (sortLength < 0) fail("has a null column");
    if (at + sortLength + 4 > size) fail("is truncated");
    const sortKey = new Uint8Array(buffer, base + at, sortLength);
    at += sortLength;
    const valueLength = view.getInt32(at);
    at += 4;
    if (valueLength < 0) fail("has a null column");
    if (at + valueLength > size) fail("is truncated");
    const value = new Uint8Array(buffer, base + at, valueLength);
    at += valueLength;
    const pgMicros = high * TWO_32 + low;
    rows.push({
      eventTime:
        pgMicros > -EXACT_MICROS && pgMicros < EXACT_MICROS
          ? BigInt(pgMicros + PG_EPOCH_MICROS)
          : unixMicrosOfInt64(high, low, fail),
      sortKey,
      value,
    });
  }
}

/** Event times a double cannot hold exactly, and the infinities, which no record has. */
function unixMicrosOfInt64(high: number, low: number, fail: (what: string) => never): bigint {
  const pgMicros = (BigInt(high) << 32n) | BigInt(low);
  if (pgMicros === INT64_MAX || pgMicros === INT64_MIN) fail("has an infinite event_time");
  return pgMicros + BigInt(PG_EPOCH_MICROS);
}
