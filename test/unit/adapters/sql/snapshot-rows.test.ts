/**
 * The snapshot page decoder of binary rows, checked against the rows that
 * were encoded: tricky rows, every finite event time, damaged pages.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeSnapshotRows } from "../../../../src/adapters/sql/hot-store/snapshot-rows.js";
import type { BinaryRows } from "../../../../src/adapters/sql/wire-rows.js";
import { rowsOf } from "../../../../src/ports/row-page.js";
import { InvariantViolationError } from "../../../../src/errors.js";
import type { BucketRow } from "../../../../src/ports/hot-store.js";

/** A page's rows one object each, as the page's statement could have asked for any number. */
const decode = (rows: BinaryRows) => rowsOf(decodeSnapshotRows(rows, 1_000_000));

const PG_EPOCH_MICROS = 946_684_800_000_000n;

/** The DataRow messages `SELECT event_time, sort_key, value …` returns in binary for `rows`. */
function binaryRows(rows: readonly BucketRow[]): BinaryRows {
  const parts: Buffer[] = [];
  for (const row of rows) {
    const head = Buffer.alloc(1 + 4 + 2 + 4 + 8 + 4);
    head.write("D", 0, "latin1");
    head.writeUInt32BE(4 + 2 + 4 + 8 + 4 + row.sortKey.byteLength + 4 + row.value.byteLength, 1);
    head.writeInt16BE(3, 5);
    head.writeInt32BE(8, 7);
    head.writeBigInt64BE(row.eventTime - PG_EPOCH_MICROS, 11);
    head.writeInt32BE(row.sortKey.byteLength, 19);
    const valueLength = Buffer.alloc(4);
    valueLength.writeInt32BE(row.value.byteLength);
    parts.push(head, Buffer.from(row.sortKey), valueLength, Buffer.from(row.value));
  }
  return { bytes: Buffer.concat(parts), rows: rows.length };
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
    const decoded = decode(binaryRows(rows));
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
        return decode(binaryRows([row]))[0]!.eventTime === eventTime;
      }),
    );
  });

  it("refuse a page that is truncated, longer than its rows, not DataRows, has a row that does not fill its message, a null or missing column or an infinite event time", () => {
    const good = binaryRows(ROWS.slice(0, 3));
    const damaged = (change: (bytes: Buffer) => void): BinaryRows => {
      const bytes = Buffer.from(good.bytes);
      change(bytes);
      return { bytes, rows: good.rows };
    };
    const size = good.bytes.byteLength;
    const bad: BinaryRows[] = [
      { bytes: good.bytes.subarray(0, size - 1), rows: 3 },
      { bytes: good.bytes.subarray(0, 10), rows: 3 },
      { bytes: good.bytes.subarray(0, 23 + 2), rows: 3 },
      // Rows the server counted and did not send, and bytes past the rows it counted.
      { bytes: good.bytes, rows: 4 },
      { bytes: good.bytes, rows: 2 },
      damaged((b) => b.writeInt32BE(-1, size - 1 - 4)),
      damaged((b) => b.write("C", 0, "latin1")),
      damaged((b) => b.writeUInt32BE(b.readUInt32BE(1) + 1, 1)),
      damaged((b) => b.writeInt16BE(2, 5)),
      damaged((b) => b.writeInt32BE(4, 7)),
      damaged((b) => b.writeBigInt64BE(2n ** 63n - 1n, 11)),
      damaged((b) => b.writeBigInt64BE(2n ** 63n - PG_EPOCH_MICROS, 11)),
      damaged((b) => b.writeBigInt64BE(-(2n ** 63n), 11)),
    ];
    for (const page of bad) expect(() => decode(page)).toThrow(InvariantViolationError);
    expect(decode(good)).toHaveLength(3);
    expect(decode({ bytes: Buffer.alloc(0), rows: 0 })).toHaveLength(0);
    expect(() => decodeSnapshotRows(good, 2)).toThrow(/are 3, more than the 2/);
  });
});
