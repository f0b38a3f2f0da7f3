/**
 * The Parquet writer's test cases, shared by the unit test (our reader,
 * hyparquet, DuckDB) and the integration test that reads them through
 * pyarrow: rows in clustering order and what their statistics must be.
 */
import { createHash } from "node:crypto";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";

export const KEY = new Uint8Array([0x00, 0x70, 0xff, 0x10]);
export const T2024 = parseRfc3339Micros("2024-01-01T00:00:00Z");
/** The extreme event times a TIMESTAMP(NANOS) holds, in whole microseconds. */
export const MIN_MICROS = -(2n ** 63n / 1000n);
export const MAX_MICROS = (2n ** 63n - 1n) / 1000n;

export function pseudoRandomBytes(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed | 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** Rows in clustering order; sort keys are not monotonic across times, so chunk min/max are not the ends. */
export function makeRows(count: number, valueBytes = (i: number) => 40 + (i % 300)): BucketRow[] {
  return Array.from({ length: count }, (_, i) => ({
    eventTime: T2024 + BigInt(Math.floor(i / 3)) * 1_000n,
    sortKey: new Uint8Array([i % 3, (i * 7919) & 0xff, (i >> 8) & 0xff]),
    value: pseudoRandomBytes(valueBytes(i), i + 1),
  }));
}

/** Per row group: first and last event time in ns, smallest and largest sort key. */
export function expectedStats(rows: readonly BucketRow[], rowGroupRows: number) {
  const groups = [];
  for (let at = 0; at < rows.length; at += rowGroupRows) {
    const group = rows.slice(at, at + rowGroupRows);
    const keys = group.map((r) => Buffer.from(r.sortKey)).sort(Buffer.compare);
    groups.push({
      times: [group[0]!.eventTime * 1000n, group[group.length - 1]!.eventTime * 1000n],
      keys: [keys[0]!, keys[keys.length - 1]!],
    });
  }
  return groups;
}

/**
 * Values as incompressible as random bytes (SHA-256 in counter mode), which
 * Zstandard stores raw: the writer then stores the pages of later row
 * groups as raw frames itself (native.ts, storeRaw).
 */
export function incompressibleRows(count: number, valueBytes = 200): BucketRow[] {
  return makeRows(count).map((row, i) => {
    const value = new Uint8Array(valueBytes);
    for (let at = 0; at < valueBytes; at += 32) {
      const block = createHash("sha256").update(`${i}:${at}`).digest();
      value.set(block.subarray(0, Math.min(32, valueBytes - at)), at);
    }
    return { ...row, value };
  });
}

/** Every writer case: a name, its rows, and rows per row group (undefined: the default). */
export const PARQUET_CASES: readonly [string, () => BucketRow[], number | undefined][] = [
  ["an empty bucket", () => [], undefined],
  ["one row", () => makeRows(1), undefined],
  ["rows crossing page and row-group boundaries", () => makeRows(5_000), 1_000],
  [
    "0-byte and 1 MiB+ values",
    () => makeRows(40, (i) => (i % 4 === 0 ? 0 : i % 4 === 1 ? 1_100_000 + i : 100)),
    16,
  ],
  [
    "event times at the TIMESTAMP(NANOS) limits",
    () => [
      { eventTime: MIN_MICROS, sortKey: new Uint8Array([1]), value: new Uint8Array([1]) },
      { eventTime: MIN_MICROS, sortKey: new Uint8Array([2]), value: new Uint8Array() },
      { eventTime: 0n, sortKey: new Uint8Array(), value: new Uint8Array([0]) },
      { eventTime: MAX_MICROS, sortKey: new Uint8Array([0xff]), value: new Uint8Array([2]) },
    ],
    2,
  ],
  ["a file of 1,000 row groups", () => makeRows(1_000, () => 8), 1],
  [
    "incompressible values: later row groups' value pages stored as raw frames",
    () => incompressibleRows(6_000),
    1_000,
  ],
];
