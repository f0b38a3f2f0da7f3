/**
 * The snapshot page decoder of binary COPY, checked against the rows that
 * were encoded: tricky rows, every finite event time, damaged pages.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeBinarySnapshot } from "../../../../src/adapters/sql/hot-store/binary-copy.js";
import { rowsOf } from "../../../../src/ports/row-page.js";
import { InvariantViolationError } from "../../../../src/errors.js";
import type { BucketRow } from "../../../../src/ports/hot-store.js";

/** A page's rows one object each, as the page's statement could have asked for any number. */
const decode = (bytes: Buffer) => rowsOf(decodeBinarySnapshot(bytes, 1_000_000));

const PG_EPOCH_MICROS = 946_684_800_000_000n;

/** `COPY (SELECT event_time, sort_key, value …) TO STDOUT (FORMAT binary)` of `rows`. */
function binaryCopy(rows: readonly BucketRow[]): Buffer {
  const parts = [Buffer.from("PGCOPY\n\xff\r\n\0", "latin1"), Buffer.alloc(8)];
  for (const row of rows) {
    const head = Buffer.alloc(2 + 4 + 8 + 4);
    head.writeInt16BE(3, 0);
    head.writeInt32BE(8, 2);
    head.writeBigInt64BE(row.eventTime - PG_EPOCH_MICROS, 6);
    head.writeInt32BE(row.sortKey.byteLength, 14);
    const valueLength = Buffer.alloc(4);
    valueLength.writeInt32BE(row.value.byteLength);
    parts.push(head, Buffer.from(row.sortKey), valueLength, Buffer.from(row.value));
  }
  parts.push(Buffer.from([0xff, 0xff]));
  return Buffer.concat(parts);
}

const ROWS: BucketRow[] = [
  { eventTime: 1_700_000_000_000_000n, sortKey: new Uint8Array(0), value: new Uint8Array(0) },
  { eventTime: 1_700_000_000_000_001n, sortKey: Buffer.from("k"), value: new Uint8Array(0) },
  { eventTime: 1_700_000_000_000_001n, sortKey: Buffer.from("k2"), value: Buffer.from("v") },
  {
    eventTime: 1_700_000_000_123_456n,
    sortKey: Buffer.alloc(300, 7),
    value: Buffer.alloc(70 * 1024, 0xab),
  },
  { eventTime: -PG_EPOCH_MICROS, sortKey: Buffer.from([0]), value: Buffer.from([0, 0, 0]) },
];

describe("the snapshot page decoder", () => {
  it("decode empty sort keys, empty values, values over 64 KiB and any event time to the rows written", () => {
    const rows: BucketRow[] = [
      ...ROWS,
      // Beyond the range a double holds exactly, on both sides.
      { eventTime: 9_000_000_000_000_000n, sortKey: Buffer.from("late"), value: Buffer.from("x") },
      {
        eventTime: -9_000_000_000_000_000n,
        sortKey: Buffer.from("early"),
        value: new Uint8Array(0),
      },
      {
        eventTime: 2n ** 53n + 1n + PG_EPOCH_MICROS,
        sortKey: Buffer.from("odd"),
        value: Buffer.from(""),
      },
      {
        eventTime: -(2n ** 53n) - 1n + PG_EPOCH_MICROS,
        sortKey: Buffer.from("odd"),
        value: Buffer.from(""),
      },
    ];
    const decoded = decode(binaryCopy(rows));
    expect(decoded.map((r) => r.eventTime)).toEqual(rows.map((r) => r.eventTime));
    expect(decoded.map((r) => Buffer.from(r.sortKey).toString("hex"))).toEqual(
      rows.map((r) => Buffer.from(r.sortKey).toString("hex")),
    );
    expect(decoded.map((r) => Buffer.from(r.value).toString("hex"))).toEqual(
      rows.map((r) => Buffer.from(r.value).toString("hex")),
    );
  });

  it("decode any finite event time to the microsecond", () => {
    // Every 64-bit PostgreSQL timestamp but the two infinities.
    const min = -(2n ** 63n) + 1n + PG_EPOCH_MICROS;
    // Up to what 64-bit Unix microseconds hold (PostgreSQL's last years are past it).
    const max = 2n ** 63n - 1n;
    fc.assert(
      fc.property(fc.bigInt({ min, max }), (eventTime) => {
        const row = { eventTime, sortKey: new Uint8Array(0), value: new Uint8Array(0) };
        return decode(binaryCopy([row]))[0]!.eventTime === eventTime;
      }),
    );
  });

  it("refuse a page that is truncated, has a null or missing column or an infinite event time", () => {
    const good = binaryCopy(ROWS.slice(0, 3));
    const nullValue = Buffer.from(good);
    nullValue.writeInt32BE(-1, good.byteLength - 2 - 1 - 4);
    const twoColumns = Buffer.from(good);
    twoColumns.writeInt16BE(2, 19);
    const infinite = Buffer.from(good);
    infinite.writeBigInt64BE(2n ** 63n - 1n, 19 + 6);
    const pastUnix = Buffer.from(good);
    pastUnix.writeBigInt64BE(2n ** 63n - PG_EPOCH_MICROS, 19 + 6);
    const minusInfinite = Buffer.from(good);
    minusInfinite.writeBigInt64BE(-(2n ** 63n), 19 + 6);
    const bad = [
      good.subarray(0, good.byteLength - 1),
      good.subarray(0, 19 + 10),
      good.subarray(0, 19 + 18 + 2),
      nullValue,
      twoColumns,
      infinite,
      pastUnix,
      minusInfinite,
      Buffer.from("PGCOPY"),
    ];
    for (const page of bad) expect(() => decode(page)).toThrow(InvariantViolationError);
    expect(decode(good)).toHaveLength(3);
    expect(() => decodeBinarySnapshot(good, 2)).toThrow(/more than the 2 rows/);
  });
});
