/**
 * Snapshot pages in columns (ports/row-page.ts) and what reads their event
 * times a 32-bit word at a time: the order guard, the row digest and the
 * Parquet writer's time column and statistics. Each must agree with the
 * BigInt it replaces, around the word boundaries and across pages.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compareClustering } from "../../../src/domain/record.js";
import type { BucketRow } from "../../../src/ports/hot-store.js";
import {
  HIGH_WORD,
  LOW_WORD,
  rowPageOf,
  rowsOf,
  slicePage,
  timeWords,
} from "../../../src/ports/row-page.js";
import { RowDigest } from "../../../src/archive/row-digest.js";
import { RowStreamGuard } from "../../../src/archive/row-guard.js";
import { encodeParquet } from "../../../src/archive/parquet/encode.js";
import { parquetMetadata } from "hyparquet";
import { memoryByteSource, ownArrayBuffer } from "../../../src/archive/byte-sources.js";
import { verifyParquetColumns } from "../../../src/archive/parquet/verify-columns.js";
import { InvariantViolationError } from "../../../src/errors.js";
import { KEY } from "./parquet-cases.js";

const TWO_32 = 2n ** 32n;
/** Times around the words' edges: 0, ±2^32 and its neighbours, and the Parquet range's ends. */
const edgyTime = fc.oneof(
  fc.constantFrom(0n, -1n, 1n, TWO_32 - 1n, TWO_32, TWO_32 + 1n, -TWO_32, -TWO_32 - 1n),
  fc.bigInt({ min: -TWO_32 * 4n, max: TWO_32 * 4n }),
  fc.bigInt({ min: -9_223_372_036_854_775n, max: 9_223_372_036_854_775n }),
);
const row = fc.record({
  eventTime: edgyTime,
  sortKey: fc.uint8Array({ maxLength: 4 }),
  value: fc.uint8Array({ maxLength: 8 }),
});

/** Rows cut into pages at the given points. */
function pagesOf(rows: readonly BucketRow[], cuts: readonly number[]) {
  const page = rowPageOf(rows);
  const points = [...new Set([0, ...cuts.map((c) => c % (rows.length + 1)), rows.length])].sort(
    (a, b) => a - b,
  );
  return points.slice(1).map((to, i) => slicePage(page, points[i]!, to));
}

describe("snapshot pages in columns", () => {
  it("hold every row as it was, and their time words are the int64's", () => {
    fc.assert(
      fc.property(fc.array(row, { maxLength: 20 }), (rows) => {
        const page = rowPageOf(rows);
        expect(rowsOf(page)).toEqual(rows.map((r) => ({ ...r })));
        const { low, high } = timeWords(page.micros);
        rows.forEach((r, i) => {
          const high32 = BigInt(high[2 * i + HIGH_WORD]!);
          expect((high32 << 32n) + BigInt(low[2 * i + LOW_WORD]!)).toBe(r.eventTime);
        });
      }),
    );
  });

  it("the guard accepts exactly the strictly ordered rows, wherever the pages are cut", () => {
    fc.assert(
      fc.property(
        fc.array(row, { maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 4 }),
        fc.boolean(),
        (drawn, cuts, sorted) => {
          const rows = sorted ? [...drawn].sort(compareClustering) : drawn;
          const ordered = rows.every((r, i) => i === 0 || compareClustering(rows[i - 1]!, r) < 0);
          const guard = new RowStreamGuard();
          const accept = () => {
            for (const page of pagesOf(rows, cuts)) guard.acceptPage(page);
          };
          if (ordered) {
            accept();
            const digest = new RowDigest();
            for (const r of rows) digest.add(r.eventTime, r.sortKey, r.value);
            expect(guard.digest.digest()).toBe(digest.digest());
            expect(guard.digest.count).toBe(rows.length);
          } else {
            expect(accept).toThrow(InvariantViolationError);
          }
        },
      ),
    );
  });

  it("the digest of rows whose bytes lie framed in one buffer (a snapshot page's binary rows), or only seem to, is the rows' one by one", () => {
    const laidOut = fc.record({
      eventTime: edgyTime,
      sortKey: fc.uint8Array({ maxLength: 6 }),
      value: fc.uint8Array({ maxLength: 9 }),
      // Each length's 4 bytes before its field: big-endian and true, some other number, or absent.
      sortPrefix: fc.constantFrom("true", "false", "absent"),
      valuePrefix: fc.constantFrom("true", "false", "absent"),
      /** Bytes between the key and the value's length, and before the key's. */
      gap: fc.nat({ max: 2 }),
      lead: fc.nat({ max: 3 }),
    });
    fc.assert(
      fc.property(fc.array(laidOut, { maxLength: 12 }), fc.integer(), (rows, noise) => {
        const parts: Buffer[] = [];
        let at = 0;
        const put = (bytes: Buffer) => {
          parts.push(bytes);
          at += bytes.byteLength;
        };
        const prefix = (kind: string, length: number) => {
          if (kind === "absent") return;
          const b = Buffer.alloc(4);
          b.writeUInt32BE(kind === "true" ? length : (length + 1 + (noise >>> 0)) >>> 0);
          put(b);
        };
        const n = rows.length;
        const [sortStarts, sortLengths, valueStarts, valueLengths] = [0, 0, 0, 0].map(
          () => new Int32Array(n),
        ) as [Int32Array, Int32Array, Int32Array, Int32Array];
        const micros = new BigInt64Array(n);
        rows.forEach((r, i) => {
          put(Buffer.alloc(r.lead, 0x44));
          prefix(r.sortPrefix, r.sortKey.byteLength);
          sortStarts[i] = at;
          sortLengths[i] = r.sortKey.byteLength;
          put(Buffer.from(r.sortKey));
          put(Buffer.alloc(r.gap, 0xee));
          prefix(r.valuePrefix, r.value.byteLength);
          valueStarts[i] = at;
          valueLengths[i] = r.value.byteLength;
          put(Buffer.from(r.value));
          micros[i] = r.eventTime;
        });
        const data = Buffer.concat(parts);
        const framed = new RowDigest();
        framed.addRanges(micros, data, sortStarts, sortLengths, data, valueStarts, valueLengths, n);
        const oneByOne = new RowDigest();
        for (const r of rows) oneByOne.add(r.eventTime, r.sortKey, r.value);
        expect(framed.count).toBe(n);
        expect(framed.digest()).toBe(oneByOne.digest());
      }),
      { numRuns: 300 },
    );
  });

  it("the writer's time column and statistics are the rows' times in nanoseconds", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(edgyTime, { minLength: 1, maxLength: 30 }), async (times) => {
        const rows = [...times]
          .sort((a, b) => (a < b ? -1 : 1))
          .map((eventTime) => ({
            eventTime,
            sortKey: new Uint8Array(0),
            value: new Uint8Array(1),
          }));
        async function* pages() {
          yield rowPageOf(rows);
        }
        const guard = new RowStreamGuard();
        const chunks: Uint8Array[] = [];
        for await (const chunk of encodeParquet(KEY, pages(), guard, { rowGroupRows: 7 }))
          chunks.push(Uint8Array.from(chunk));
        const file = Buffer.concat(chunks);
        // The decoder checks each row group's event_time statistics against its decoded times.
        const content = await verifyParquetColumns(memoryByteSource("rows", file), {});
        expect(content?.rowCount).toBe(rows.length);
        expect(content?.rowsDigest).toBe(guard.digest.digest());
        const stats = parquetMetadata(ownArrayBuffer(file)).row_groups.map((group) => {
          const meta = group.columns[1]!.meta_data!;
          return [meta.statistics?.min_value, meta.statistics?.max_value];
        });
        expect(stats.length).toBe(Math.ceil(rows.length / 7));
      }),
      { numRuns: 40 },
    );
  });
});
