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
const PG_EPOCH_MICROS = 946_684_800_000_000n;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

/**
 * Rows of a snapshot page from the binary COPY of its query (columns
 * event_time, sort_key, value). Keys and values are views into `bytes`,
 * which lives as long as the page.
 */
export function decodeBinarySnapshot(bytes: Buffer): BucketRow[] {
  const fail = (what: string): never => {
    throw new InvariantViolationError(`binary COPY of a snapshot page ${what}`);
  };
  if (bytes.byteLength < 19 || !bytes.subarray(0, 11).equals(COPY_SIGNATURE)) fail("has no header");
  let at = 19 + bytes.readUInt32BE(15);
  // DataView's getBigInt64 makes one BigInt; Buffer's readBigInt64BE four.
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const rows: BucketRow[] = [];
  const field = (): number => {
    if (at + 4 > bytes.byteLength) fail("is truncated");
    const length = bytes.readInt32BE(at);
    at += 4;
    if (length < 0) fail("has a null column");
    if (at + length > bytes.byteLength) fail("is truncated");
    return length;
  };
  for (;;) {
    if (at + 2 > bytes.byteLength) fail("is truncated");
    const fields = bytes.readInt16BE(at);
    at += 2;
    if (fields === -1) return rows;
    if (fields !== 3) fail(`has ${fields} columns, not 3`);
    if (field() !== 8) fail("has a timestamp that is not 8 bytes");
    const pgMicros = view.getBigInt64(at, false);
    at += 8;
    if (pgMicros === INT64_MAX || pgMicros === INT64_MIN) fail("has an infinite event_time");
    const sortLength = field();
    const sortKey = new Uint8Array(bytes.buffer, bytes.byteOffset + at, sortLength);
    at += sortLength;
    const valueLength = field();
    const value = new Uint8Array(bytes.buffer, bytes.byteOffset + at, valueLength);
    at += valueLength;
    rows.push({ eventTime: pgMicros + PG_EPOCH_MICROS, sortKey, value });
  }
}
