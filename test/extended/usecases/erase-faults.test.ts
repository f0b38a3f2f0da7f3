/**
 * Erasure under faults and races: a crash at each step of the job resumes
 * to exactly the same result with every count once; an append racing the
 * hot delete lands wholly before or after it; a reader sees the old or the
 * new version; garbage collection keeps what a reader or the erasure needs.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ErasureStore } from "../../../src/ports/erasure-store.js";
import { fixedCutoff } from "../../../src/domain/cutoff.js";
import { proveErasure } from "../../../src/usecases/erase-proof.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import type { FaultPoint, HotOperation } from "../../support/faults.js";
import type { ObjectOperation } from "../../../src/adapters/object-store/memory.js";
import {
  collectOn,
  archivedRecords,
  makeHarness,
  readBucketAsReader,
  type Harness,
} from "../../support/workflow-harness.js";
import {
  erase,
  ERASE_TABLE,
  expectErasedExactly,
  faultyErasureStore,
  seedErasureWorld,
  storeOf,
  victimBucket,
  victimCount,
  VICTIM,
  type Expected,
} from "../../support/erasure.js";
import { setDatabaseClock } from "../../support/database-clock.js";

const DAY = 86_400_000;

interface CrashCase {
  readonly name: string;
  readonly hot?: FaultPoint<HotOperation>;
  readonly object?: FaultPoint<ObjectOperation>;
  readonly store?: { operation: keyof ErasureStore; when: "before" | "after"; nth?: number };
}

const CRASHES: CrashCase[] = [
  { name: "after the job is recorded", store: { operation: "createJob", when: "after" } },
  {
    name: "after the lease of the first archived bucket is taken",
    hot: { operation: "acquireLease", when: "after", kind: "crash" },
  },
  {
    name: "after the first new payload part is written",
    object: {
      operation: "createIfAbsent",
      when: "after",
      kind: "crash",
      keyIncludes: "/payloads/",
    },
  },
  {
    name: "after the new manifest is written",
    object: {
      operation: "createIfAbsent",
      when: "after",
      kind: "crash",
      keyIncludes: "/manifests/",
    },
  },
  {
    name: "before the new version is published",
    store: { operation: "publishErasedVersion", when: "before" },
  },
  {
    name: "after the new version is published, before the catalog entry is rewritten",
    store: { operation: "publishErasedVersion", when: "after" },
  },
  {
    name: "after the second archived bucket is published",
    store: { operation: "publishErasedVersion", when: "after", nth: 2 },
  },
  { name: "after the hot delete commits", store: { operation: "eraseHotRange", when: "after" } },
  {
    name: "before the job is marked done",
    store: { operation: "setJobStatus", when: "before", nth: 1 },
  },
];

/** `store` crashing on the nth call of one method. */
function crashingStore(store: ErasureStore, point: NonNullable<CrashCase["store"]>): ErasureStore {
  let calls = 0;
  return faultyErasureStore(store, point.operation, point.when, async () => {
    calls++;
    if (calls === (point.nth ?? 1)) throw new Error(`simulated crash at ${point.operation}`);
  });
}

describe("an erasure job", () => {
  let h: Harness;
  let expected: Expected;

  beforeEach(async () => {
    h = await makeHarness({ segmentRows: 4 });
    expected = await seedErasureWorld(h, 10);
  });
  afterEach(async () => {
    await h.close();
  });

  it.each(CRASHES.map((c) => [c.name, c] as const))(
    "crashing %s resumes on the next run to every record erased once and every other kept",
    async (_, crash) => {
      const dying = h.process({
        ...(crash.hot && { hot: crash.hot }),
        ...(crash.object && { object: crash.object }),
      });
      const store = crash.store === undefined ? storeOf(h) : crashingStore(storeOf(h), crash.store);
      await expect(erase(dying.ctx, store)).rejects.toThrow(/simulated crash/);

      h.clock.advance(h.settings.leaseMs + 1_000);
      const resumed = await erase(h.process().ctx, storeOf(h));
      expect(resumed).toMatchObject({ status: "done", buckets_pending: 0 });
      // Every record counted exactly once over both runs (the receipt sums them).
      expect(resumed.records_removed).toBe(victimCount(expected));
      expect(resumed.buckets).toHaveLength(4);
      await expectErasedExactly(h, expected);
      expect(resumed.resumed).toBe(true);
    },
  );

  it("an append of the key lands wholly before the hot delete (erased) or wholly after it (kept)", async () => {
    const id = victimBucket("2026-03");
    const late = (n: number) =>
      [0, 1].map((i) => ({
        partitionKey: VICTIM,
        eventTime: BigInt(Date.parse("2026-03-20T00:00:00Z")) * 1000n + BigInt(n * 10 + i),
        sortKey: Uint8Array.of(n, i),
        value: new Uint8Array(i * 1000),
      }));
    let store = faultyErasureStore(storeOf(h), "eraseHotRange", "before", async () => {
      await h.inner.append(ERASE_TABLE, late(1), h.clock.now());
    });
    store = faultyErasureStore(store, "eraseHotRange", "after", async () => {
      await h.inner.append(ERASE_TABLE, late(2), h.clock.now());
    });

    const report = await erase(h.process().ctx, store);

    expect(report.buckets.find((b) => b.bucket_key === id.bucketKey)?.records_removed).toBe(10 + 2);
    const left = await readBucketAsReader(h, id);
    expect(left.map((r) => [...r.sortKey])).toEqual([
      [2, 0],
      [2, 1],
    ]);
  });

  it("a claim and export landing between the bucket's read and the hot delete leave it pending, and the next run erases it from its archive", async () => {
    const id = victimBucket("2026-03");
    const wide = {
      ...h.process().ctx,
      settings: { ...h.settings, cutoff: fixedCutoff(new Date("2027-01-01T00:00:00Z")) },
    };
    // Claim, export and seal the hot bucket just before the delete: its rows are in a sealed archive.
    const store = faultyErasureStore(storeOf(h), "eraseHotRange", "before", async () => {
      for (let step = 0; step < 3; step++) await runNextPhase(wide, id);
    });
    const first = await erase(h.process().ctx, store);
    expect(first.buckets.find((b) => b.bucket_key === id.bucketKey)).toMatchObject({
      status: "pending",
    });
    for (let step = 0; step < 4; step++) await runNextPhase(wide, id);
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "archived", hotDeleted: true });

    const second = await erase(h.process().ctx, storeOf(h));
    expect(second).toMatchObject({ status: "done", records_removed: victimCount(expected) });
    await expectErasedExactly(h, expected);
    expect(await proveErasure(h.process().ctx, storeOf(h), second.job_id!)).toMatchObject({
      proven: true,
    });
  });

  it("a reader racing the publish sees the whole old version before it and the new one after it", async () => {
    const id = victimBucket("2025-02");
    const seen: number[] = [];
    let store = faultyErasureStore(storeOf(h), "publishErasedVersion", "before", async () => {
      seen.push((await readBucketAsReader(h, id)).length);
    });
    store = faultyErasureStore(store, "publishErasedVersion", "after", async () => {
      seen.push((await readBucketAsReader(h, id)).length);
    });
    await erase(h.process().ctx, store, {
      from: new Date("2025-02-01T02:00:00Z"),
      to: null,
    });
    // 2025-01 holds nothing in range; 2025-02 publishes first: the reader saw 10, then 2.
    expect(seen.slice(0, 2)).toEqual([10, 2]);
    expect(await readBucketAsReader(h, id)).toHaveLength(2);
  });

  it("garbage collection keeps the new version, keeps the old one for readers for its minimum age, then deletes it", async () => {
    const id = victimBucket("2025-01");
    h.clock.set(new Date(Date.now()));
    const before = await h.inner.getBucket(id);
    const oldParts = (await h.inner.listParts(id)).map((p) => p.key);
    const gc = () => collectOn(h, DAY);
    // GC running while the new version is written (leased, unpublished) deletes none of it.
    const store = faultyErasureStore(storeOf(h), "publishErasedVersion", "before", async () => {
      await gc();
    });
    await erase(h.process().ctx, store, { from: new Date("2025-01-01T03:00:00Z"), to: null });
    expect(await archivedRecords(h, id)).toHaveLength(3);

    // Just after: the old version is unreferenced but younger than GC's minimum age since the cutover.
    h.clock.advance(DAY / 2);
    await setDatabaseClock(h.inner, h.clock.now());
    await gc();
    for (const key of [...oldParts, before!.manifestKey!])
      expect((await h.objects.get(key)).byteLength, key).toBeGreaterThan(0);

    h.clock.advance(2 * DAY);
    await setDatabaseClock(h.inner, h.clock.now());
    await gc();
    for (const key of [...oldParts, before!.manifestKey!])
      await expect(h.objects.get(key), key).rejects.toThrow();
    expect(await archivedRecords(h, id)).toHaveLength(3);
    await expectErasedExactly(h, expected, { from: new Date("2025-01-01T03:00:00Z"), to: null });
  });
});
