/**
 * The operator methods of the hot store (src/ports/hot-store-operations.ts),
 * run against every adapter: PGlite in the unit suite, real PostgreSQL in the
 * integration suite. Tests isolate themselves with unique table ids; the
 * held-bucket view sees every table, so its test runs on a store of its own.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BucketId } from "../../src/domain/bucket.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseTableId, type TableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { UnknownTableError } from "../../src/errors.js";
import type { BucketMetadata, HotStore, Lease, PhaseName } from "../../src/ports/hot-store.js";
import { recordOnePart } from "./hot-store/support.js";
import { fixedCutoffs } from "../support/cutoffs.js";

export interface OpenedStore {
  readonly store: HotStore;
  cleanup(): Promise<void>;
}

const LEASE_MS = 60_000;
const NOW = new Date("2025-06-01T00:00:00.000Z");
const CUTOFF = new Date("2025-01-01T00:00:00.000Z");
const later = (ms: number) => new Date(NOW.getTime() + ms);
const text = (s: string) => new TextEncoder().encode(s);
let counter = 0;

async function newTable(store: HotStore, label: string): Promise<TableId> {
  counter++;
  const tableId = parseTableId(`${label}-${counter}-${Math.random().toString(36).slice(2, 7)}`);
  await store.registerTable(
    { tableId, strategy: "CalendarYearUtc", format: "json", writableBuckets: null },
    NOW,
  );
  return tableId;
}

/** A bucket of `year` (2023 and 2024 end before the cutoff's year ends) holding `rows` records. */
async function bucket(
  store: HotStore,
  tableId: TableId,
  partition: string,
  year: number,
  rows = 3,
): Promise<BucketId> {
  const records: TableRecord[] = Array.from({ length: rows }, (_, i) => ({
    partitionKey: text(partition),
    eventTime: parseRfc3339Micros(`${year}-03-01T00:00:00.${String(i).padStart(6, "0")}Z`),
    sortKey: text(`k${i}`),
    value: text(`v${i}`),
  }));
  await store.append(tableId, records, NOW);
  return { tableId, partitionKey: text(partition), bucketKey: `year:${year}` };
}

async function lease(store: HotStore, id: BucketId, now = NOW, ms = LEASE_MS): Promise<Lease> {
  const r = await store.acquireLease(id, now, ms);
  if (r.kind !== "acquired") throw new Error(`expected the lease, got ${r.kind}`);
  return r.lease;
}

function committed<T extends { kind: string }>(r: T): Extract<T, { kind: "committed" }> {
  if (r.kind !== "committed") throw new Error(`expected committed, got ${r.kind}`);
  return r as Extract<T, { kind: "committed" }>;
}

/** Drive a bucket forward until its recorded phase is `target` ("done" = fully archived). */
async function advanceTo(
  store: HotStore,
  id: BucketId,
  target: PhaseName | "done",
): Promise<BucketMetadata> {
  const order = ["claim", "export", "seal", "publish", "cleanup", "done"];
  let m = (await store.getBucket(id))!;
  while (order.indexOf(m.phase) < order.indexOf(target)) {
    const l = await lease(store, id);
    const payload = {
      key: `p/${id.bucketKey}.json`,
      sha256: "a".repeat(64),
      rowCount: 3,
      byteLength: 100,
    };
    switch (m.phase) {
      case "claim":
        m = committed(await store.claim(l, NOW, fixedCutoffs(CUTOFF))).metadata;
        break;
      case "export":
        m = committed(await recordOnePart(store, l, NOW, payload)).metadata;
        break;
      case "seal":
        m = committed(await store.recordManifest(l, NOW, `m/${id.bucketKey}.json`)).metadata;
        break;
      case "publish":
        m = committed(await store.publish(l, NOW)).metadata;
        break;
      case "cleanup": {
        while ((await store.cleanupBatch(l, NOW, 100)).kind === "deleted") {
          const finished = await store.finishCleanup(l, NOW);
          if (finished.kind === "committed") break;
        }
        m = (await store.getBucket(id))!;
        break;
      }
    }
  }
  return m;
}

const key = (id: BucketId) => `${Buffer.from(id.partitionKey).toString()}/${id.bucketKey}`;

export function hotStoreOperationsConformance(name: string, open: () => Promise<OpenedStore>) {
  describe(`hot store operator methods: ${name}`, () => {
    let opened: OpenedStore;
    let store: HotStore;
    beforeAll(async () => {
      opened = await open();
      store = opened.store;
    }, 120_000);
    afterAll(async () => opened.cleanup());

    it("lists a table's archived buckets page by page in key order, with their current payload and manifest", async () => {
      const t = await newTable(store, "archived");
      const ids: BucketId[] = [];
      for (const p of ["b", "a", "c"])
        for (const y of [2023, 2022]) ids.push(await bucket(store, t, p, y));
      await bucket(store, t, "a", 2025);
      for (const id of ids) await advanceTo(store, id, "done");
      const pendingCleanup = await bucket(store, t, "d", 2023);
      await advanceTo(store, pendingCleanup, "cleanup");

      const seen: string[] = [];
      let after: BucketId | null = null;
      for (;;) {
        const page = await store.listArchivedBuckets(t, { after, limit: 2 });
        if (page.length === 0) break;
        seen.push(...page.map((b) => key(b.id)));
        after = page[page.length - 1]!.id;
      }
      expect(seen).toEqual([
        "a/year:2022",
        "a/year:2023",
        "b/year:2022",
        "b/year:2023",
        "c/year:2022",
        "c/year:2023",
        "d/year:2023",
      ]);
      const [first] = await store.listArchivedBuckets(t, { after: null, limit: 1 });
      expect(first).toMatchObject({
        strategy: "CalendarYearUtc",
        start: new Date("2022-01-01T00:00:00Z"),
        end: new Date("2023-01-01T00:00:00Z"),
        payload: { key: "p/year:2022.json", rowCount: 3, byteLength: 100 },
        manifestKey: "m/year:2022.json",
        hotDeleted: true,
        restoreStartedAt: null,
      });
      const d = await store.listArchivedBuckets(t, {
        partitionKey: text("d"),
        after: null,
        limit: 10,
      });
      expect(d.map((b) => [key(b.id), b.hotDeleted])).toEqual([["d/year:2023", false]]);
    });

    it("refuses to unregister a table while any bucket of it is in flight, changing nothing", async () => {
      const t = await newTable(store, "inflight");
      const archiving = await bucket(store, t, "archiving", 2023);
      await advanceTo(store, archiving, "export");
      const r = await store.beginTableDrop(t, NOW);
      expect(r.kind).toBe("in-flight");
      if (r.kind !== "in-flight") return;
      expect(r.buckets.map((b) => [key(b.id), b.state, b.phase])).toEqual([
        ["archiving/year:2023", "archiving", "export"],
      ]);
      expect(await store.getTable(t)).not.toBeNull();
    });

    it.each([
      ["archiving with no live lease", "export"],
      ["archived with cleanup pending", "cleanup"],
      ["under a live lease while hot", "leased"],
      ["being restored", "restoring"],
    ] as const)("counts a bucket %s as in flight", async (_label, how) => {
      const t = await newTable(store, "inflight");
      const id = await bucket(store, t, "p", 2023);
      if (how === "leased") await lease(store, id);
      else if (how === "restoring") {
        await advanceTo(store, id, "done");
        const l = await lease(store, id);
        committed(await store.beginRestore(l, NOW));
        await store.releaseLease(l);
      } else await advanceTo(store, id, how);
      const r = await store.beginTableDrop(t, NOW);
      expect(r.kind).toBe("in-flight");
      expect(await store.getTable(t)).not.toBeNull();
    });

    it("pauses a table to drop with nothing in flight, removes its buckets under their leases, and unregisters it once none remain", async () => {
      const t = await newTable(store, "drop");
      const hot = await bucket(store, t, "p", 2023);
      const done = await bucket(store, t, "q", 2022);
      await advanceTo(store, done, "done");
      expect(await store.beginTableDrop(t, NOW)).toEqual({ kind: "paused" });
      expect((await store.getTable(t))?.paused).toBe(true);
      const hotLease = await lease(store, hot);
      const offered = await store.peekCandidates({
        now: NOW,
        ...fixedCutoffs(CUTOFF),
        limit: 10_000,
        enqueuedBefore: NOW,
      });
      expect(offered.filter((c) => c.id.tableId === t)).toEqual([]);
      expect(await store.finishTableDrop(t)).toBe("buckets-remain");
      for (const [id, l] of [
        [hot, hotLease],
        [done, await lease(store, done)],
      ] as const) {
        let after = null;
        for (;;) {
          const batch = await store.dropBucketBatch(l, NOW, 2, after);
          if (batch.kind !== "deleted") throw new Error(batch.kind);
          if (batch.bucketRemoved) break;
          after = batch.last ?? null;
        }
        expect(await store.getBucket(id)).toBeNull();
      }
      expect(await store.finishTableDrop(t)).toBe("dropped");
      expect(await store.getTable(t)).toBeNull();
      await expect(bucket(store, t, "p", 2024)).rejects.toBeInstanceOf(UnknownTableError);
      expect(await store.beginTableDrop(t, NOW)).toEqual({ kind: "unknown" });
    });

    it("refuses to claim a bucket of a table being dropped, so no archival starts after the check", async () => {
      const t = await newTable(store, "noclaim");
      const id = await bucket(store, t, "p", 2023);
      expect(await store.beginTableDrop(t, NOW)).toEqual({ kind: "paused" });
      expect((await store.claim(await lease(store, id), NOW, fixedCutoffs(CUTOFF))).kind).toBe(
        "lease-lost",
      );
      expect((await store.getBucket(id))?.state).toBe("hot");
    });

    it("deletes a bucket's hot rows in key-range batches and then its metadata, only under the live lease", async () => {
      const t = await newTable(store, "batches");
      const id = await bucket(store, t, "p", 2023, 5);
      const stale = await lease(store, id, NOW, 1_000);
      const current = await lease(store, id, later(2_000));
      expect((await store.dropBucketBatch(stale, later(2_000), 2, null)).kind).toBe("lease-lost");
      expect(await store.countHotRows(id)).toBe(5);
      const batches = [];
      let after = null;
      for (;;) {
        const b = await store.dropBucketBatch(current, later(2_000), 2, after);
        if (b.kind !== "deleted") throw new Error(b.kind);
        batches.push([b.rows, b.bucketRemoved]);
        if (b.bucketRemoved) break;
        after = b.last ?? null;
      }
      expect(batches).toEqual([
        [2, false],
        [2, false],
        [1, true],
      ]);
      expect(await store.getBucket(id)).toBeNull();
      expect(await store.countHotRows(id)).toBe(0);
      // A retried batch whose first reply was lost finds the bucket gone and says so.
      expect(await store.dropBucketBatch(current, later(2_000), 2, null)).toEqual({
        kind: "deleted",
        rows: 0,
        bucketRemoved: true,
      });
    });

    it("starts over when rows appear before where the batches are (appends during the drop)", async () => {
      const t = await newTable(store, "appends");
      const id = await bucket(store, t, "p", 2023, 3);
      const l = await lease(store, id);
      const first = await store.dropBucketBatch(l, NOW, 2, null);
      expect(first).toMatchObject({ kind: "deleted", rows: 2, bucketRemoved: false });
      await store.append(
        t,
        [
          {
            partitionKey: text("p"),
            eventTime: parseRfc3339Micros("2023-01-01T00:00:00Z"),
            sortKey: text("early"),
            value: text("x"),
          },
        ],
        NOW,
      );
      const after = first.kind === "deleted" ? (first.last ?? null) : null;
      const second = await store.dropBucketBatch(l, NOW, 2, after);
      expect(second).toEqual({ kind: "deleted", rows: 1, bucketRemoved: false });
      const third = await store.dropBucketBatch(l, NOW, 2, null);
      expect(third).toEqual({ kind: "deleted", rows: 1, bucketRemoved: true });
    });
  });
}

/** The held-bucket view reads every table, so it gets a store of its own. */
export function heldBucketsConformance(name: string, open: () => Promise<OpenedStore>) {
  describe(`hot store held buckets: ${name}`, () => {
    let opened: OpenedStore;
    let store: HotStore;
    beforeAll(async () => {
      opened = await open();
      store = opened.store;
    }, 120_000);
    afterAll(async () => opened.cleanup());

    it("lists eligible buckets discovery skips, and buckets in flight, with the facts behind each", async () => {
      const t = await newTable(store, "held");
      const paused = await newTable(store, "paused");
      const offered = await bucket(store, t, "offered", 2023);
      const afterCutoff = await bucket(store, t, "late", 2025);
      const deferred = await bucket(store, t, "deferred", 2023);
      committed(await store.defer(await lease(store, deferred), NOW, later(600_000), "boom"));
      const leased = await bucket(store, t, "leased", 2023);
      await lease(store, leased);
      const archiving = await bucket(store, t, "archiving", 2022);
      await advanceTo(store, archiving, "export");
      await lease(store, archiving);
      const cleanup = await bucket(store, t, "cleanup", 2022);
      await advanceTo(store, cleanup, "cleanup");
      const done = await bucket(store, t, "done", 2022);
      await advanceTo(store, done, "done");
      const ofPaused = await bucket(store, paused, "p", 2023);
      await store.setPaused(paused, true, NOW);

      const held = await store.listHeldBuckets({ now: NOW, ...fixedCutoffs(CUTOFF), limit: 100 });
      const byKey = new Map(held.map((h) => [`${h.id.tableId}/${key(h.id)}`, h]));
      const of = (id: BucketId) => byKey.get(`${id.tableId}/${key(id)}`);
      expect(of(offered)).toBeUndefined();
      expect(of(afterCutoff)).toBeUndefined();
      expect(of(cleanup)).toBeUndefined();
      expect(of(done)).toBeUndefined();
      expect(of(deferred)).toMatchObject({
        state: "hot",
        attempts: 1,
        retryAt: later(600_000),
        lastError: "boom",
        leaseExpiresAt: null,
      });
      expect(of(leased)).toMatchObject({ state: "hot", leaseExpiresAt: later(LEASE_MS) });
      expect(of(archiving)).toMatchObject({ state: "archiving", phase: "export" });
      expect(of(ofPaused)).toMatchObject({ state: "hot", tablePaused: true });
      // Oldest bucket_end first.
      expect(held.map((h) => h.end.getTime())).toEqual(
        [...held.map((h) => h.end.getTime())].sort((a, b) => a - b),
      );

      const leasedCleanup = await lease(store, cleanup);
      const again = await store.listHeldBuckets({ now: NOW, ...fixedCutoffs(CUTOFF), limit: 100 });
      expect(again.find((h) => key(h.id) === key(cleanup))).toMatchObject({
        state: "archived",
        leaseExpiresAt: leasedCleanup.expiresAt,
      });
    });
  });
}
