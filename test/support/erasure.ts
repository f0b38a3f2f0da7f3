/**
 * A world for erasure tests: a table of several partitions (odd, long and
 * all-byte keys; empty and large values) spread over archived multi-part
 * buckets and hot ones, with what every bucket must hold.
 */
import { expect } from "vitest";
import { erasureStoreOf } from "../../src/adapters/sql/erasure-store.js";
import { bucketForTime, type BucketId } from "../../src/domain/bucket.js";
import { compareClustering, type TableRecord } from "../../src/domain/record.js";
import { parseTableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import type { ErasureRange, ErasureStore } from "../../src/ports/erasure-store.js";
import type { ObjectStore } from "../../src/ports/object-store.js";
import { checkCatalogEntries } from "../../src/usecases/catalog.js";
import { eraseKey, type ErasureReport } from "../../src/usecases/erase.js";
import type { ArchiverContext } from "../../src/usecases/context.js";
import { SimulatedCrash } from "./faults.js";
import {
  converge,
  expectSameRecords,
  readBucketAsReader,
  seedTable,
  type Harness,
} from "./workflow-harness.js";

export const ERASE_TABLE = parseTableId("chat_erase");

/** The key erased: 300 bytes covering every byte value. */
export const VICTIM = Uint8Array.from({ length: 300 }, (_, i) => (i * 37 + 11) % 256);
/** Keys that must keep every record: a NUL byte, a long UTF-8 key, a prefix of the victim. */
export const OTHERS: readonly Uint8Array[] = [
  Uint8Array.of(0),
  new TextEncoder().encode("kunde-ß-🙂-".repeat(40)),
  VICTIM.slice(0, 299),
];

/** Months of 2025 are archived (the harness cutoff is 2026-01-01); 2026-03 stays hot. */
const MONTHS = ["2025-01", "2025-02", "2025-03", "2026-03"];

function recordsOf(key: Uint8Array, perMonth: number): TableRecord[] {
  const out: TableRecord[] = [];
  for (const month of MONTHS) {
    const base = parseRfc3339Micros(`${month}-01T00:00:00Z`);
    for (let i = 0; i < perMonth; i++) {
      const sortKey = Uint8Array.of(i % 256, 255 - (i % 256), 0, i >> 8);
      const value =
        i === 3
          ? new Uint8Array(300_000).fill(i)
          : i % 4 === 0
            ? new Uint8Array(0)
            : new TextEncoder().encode(`${month}/${i}`);
      out.push({
        partitionKey: key,
        eventTime: base + BigInt(i) * 3_600_000_000n + BigInt(i % 7),
        sortKey,
        value,
      });
    }
  }
  return out;
}

export type Expected = Map<string, { id: BucketId; records: TableRecord[] }>;

/** Seed every key and archive what is eligible; returns what each bucket holds. */
export async function seedErasureWorld(h: Harness<ObjectStore>, perMonth = 23): Promise<Expected> {
  const records = [VICTIM, ...OTHERS].flatMap((key) => recordsOf(key, perMonth));
  const expected = await seedTable(h, ERASE_TABLE, "CalendarMonthUtc", "parquet", records);
  await converge(h, expected);
  return expected;
}

export function storeOf(h: Harness<ObjectStore>): ErasureStore {
  const store = erasureStoreOf(h.inner);
  if (store === null) throw new Error("no SQL erasure store");
  return store;
}

export async function erase(
  ctx: ArchiverContext,
  store: ErasureStore,
  range: ErasureRange = { from: null, to: null },
  dryRun = false,
  key: Uint8Array = VICTIM,
  deadline?: Date,
): Promise<ErasureReport> {
  return await eraseKey(ctx, store, {
    tableId: ERASE_TABLE,
    partitionKey: key,
    range,
    requestedBy: "test",
    dryRun,
    ...(deadline !== undefined && { deadline }),
  });
}

export function inRangeOf(range: ErasureRange) {
  return (r: TableRecord): boolean => {
    const t = Number(r.eventTime / 1000n);
    return (
      (range.from === null || t >= range.from.getTime()) &&
      (range.to === null || t < range.to.getTime())
    );
  };
}

const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));

/**
 * Every bucket read as a reader would: the victim's without its records in
 * `range`, every other key's exactly as seeded.
 */
export async function expectErasedExactly(
  h: Harness<ObjectStore>,
  expected: Expected,
  range: ErasureRange = { from: null, to: null },
): Promise<void> {
  const erased = inRangeOf(range);
  for (const { id, records } of expected.values()) {
    const want = same(id.partitionKey, VICTIM) ? records.filter((r) => !erased(r)) : records;
    const got = await readBucketAsReader(h, id);
    expect(got.length, `${id.bucketKey} of a ${id.partitionKey.length}-byte key`).toBe(want.length);
    expectSameRecords(got.sort(compareClustering), want);
    const metadata = await h.inner.getBucket(id);
    if (metadata !== null && metadata.state === "archived") {
      const ports = {
        hotStore: h.inner,
        objectStore: h.objects,
        archivePrefix: h.settings.archivePrefix,
      };
      expect(await checkCatalogEntries(ports, metadata), id.bucketKey).toEqual([]);
    }
  }
}

/** How many of the victim's records fall in `range`. */
export function victimCount(expected: Expected, range: ErasureRange = { from: null, to: null }) {
  let n = 0;
  for (const { id, records } of expected.values())
    if (same(id.partitionKey, VICTIM)) n += records.filter(inRangeOf(range)).length;
  return n;
}

export function victimBucket(month: string): BucketId {
  return {
    tableId: ERASE_TABLE,
    partitionKey: VICTIM,
    bucketKey: bucketForTime("CalendarMonthUtc", parseRfc3339Micros(`${month}-15T00:00:00Z`)).key,
  };
}

/** The erasure store with a crash (or a hook) before or after one of its methods. */
export function faultyErasureStore(
  inner: ErasureStore,
  operation: keyof ErasureStore,
  when: "before" | "after",
  hook: () => Promise<void> = () => Promise.reject(new SimulatedCrash(`${operation}:${when}`)),
): ErasureStore {
  return new Proxy(inner, {
    get(target, name, receiver) {
      const method = Reflect.get(target, name, receiver) as unknown;
      if (name !== operation || typeof method !== "function") return method;
      return async (...args: unknown[]) => {
        if (when === "before") await hook();
        const result: unknown = await (method as (...a: unknown[]) => Promise<unknown>).apply(
          target,
          args,
        );
        if (when === "after") await hook();
        return result;
      };
    },
  });
}
