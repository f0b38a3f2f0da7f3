/**
 * Hot store conformance: discovery. It sees every table, so these tests run
 * on a store of their own and retire their buckets afterwards.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { BucketId } from "../../../src/domain/bucket.js";
import { type TableId } from "../../../src/domain/table.js";
import type { BucketMetadata, DiscoveryQuery, HotStore } from "../../../src/ports/hot-store.js";
import {
  acquire,
  advanceTo,
  at,
  bytes,
  committed,
  CUTOFF,
  LEASE_MS,
  later,
  newTable,
  NOW,
  OPEN_TIMEOUT_MS,
  rec,
  retireEverything,
  type OpenedHotStore,
} from "./support.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

export function discoveryConformance(name: string, open: () => Promise<OpenedHotStore>): void {
  describe(`hot store discovery conformance: ${name}`, () => {
    let store: HotStore;
    let cleanup: () => Promise<void>;
    // After every lease the seeding took (at NOW), and not ahead of the database's clock (leases.ts).
    const now = at("2026-01-01T00:00:00Z");
    const query = (overrides: Partial<DiscoveryQuery> = {}): DiscoveryQuery => ({
      now,
      ...fixedCutoffs(CUTOFF),
      limit: 64,
      enqueuedBefore: now,
      ...overrides,
    });
    const summary = (candidates: readonly { id: BucketId; kind: string }[]) =>
      candidates.map((c) => `${c.kind}:${c.id.partitionKey[0]}:${c.id.bucketKey}`);

    beforeAll(async () => {
      ({ store, cleanup } = await open());
      await store.migrate();
    }, OPEN_TIMEOUT_MS);

    afterEach(async () => {
      await retireEverything(store);
    });

    afterAll(async () => {
      await cleanup?.();
    });

    /** Buckets of years 2019..2023 in partitions 1..n, each holding one record. */
    async function seed(tableId: TableId, years: number[], partition = 1): Promise<BucketId[]> {
      await store.append(
        tableId,
        years.map((y) => rec(`${y}-06-01T00:00:00Z`, "k", "v", bytes(partition))),
        NOW,
      );
      return years.map((y) => ({
        tableId,
        partitionKey: bytes(partition),
        bucketKey: `year:${y}`,
      }));
    }

    it("offers eligible, stalled and cleanup buckets oldest bucket_end first, nothing newer than the cutoff and no leased hot bucket", async () => {
      const tableId = await newTable(store, "disc");
      const [y2019, , y2021, y2022] = await seed(tableId, [2019, 2020, 2021, 2022, 2025]);
      await advanceTo(store, y2019!, "cleanup");
      await advanceTo(store, y2021!, "seal");
      await acquire(store, y2022!, now); // a live lease: someone is claiming it right now

      expect(summary(await store.peekCandidates(query()))).toEqual([
        "cleanup:1:year:2019",
        "eligible:1:year:2020",
        "stalled:1:year:2021",
      ]);
      const candidates = await store.peekCandidates(query());
      // The publish commit stamped enqueued_at: its committer enqueues the next phase itself.
      expect(candidates[0]).toMatchObject({ state: "archived", phase: "cleanup" });
      expect(candidates[0]?.enqueuedAt).toBeInstanceOf(Date);
      expect(candidates[0]?.end).toEqual(at("2020-01-01T00:00:00Z"));
      expect(candidates[2]).toMatchObject({ state: "archiving", phase: "seal" });
    });

    it("does not offer an archiving or archived bucket whose lease is live", async () => {
      const tableId = await newTable(store, "live");
      const [archiving, archived] = await seed(tableId, [2019, 2020]);
      await advanceTo(store, archiving!, "export");
      await advanceTo(store, archived!, "cleanup");
      for (const id of [archiving!, archived!]) await acquire(store, id, now);

      expect(await store.peekCandidates(query())).toEqual([]);
      expect(summary(await store.peekCandidates(query({ now: later(now, LEASE_MS) })))).toEqual([
        "stalled:1:year:2019",
        "cleanup:1:year:2020",
      ]);
    });

    it("holds back a deferred bucket until its retry time", async () => {
      const tableId = await newTable(store, "retry");
      const [deferred] = await seed(tableId, [2019, 2020]);
      const retryAt = later(now, 30_000);
      await advanceTo(store, deferred!, "seal");
      committed(await store.defer(await acquire(store, deferred!, now), now, retryAt, "transient"));

      expect(summary(await store.peekCandidates(query()))).toEqual(["eligible:1:year:2020"]);
      expect(summary(await store.peekCandidates(query({ now: later(retryAt, -1) })))).toEqual([
        "eligible:1:year:2020",
      ]);
      expect(summary(await store.peekCandidates(query({ now: retryAt })))).toEqual([
        "eligible:1:year:2019",
        "eligible:1:year:2020",
      ]);
    });

    it("offers none of a paused table's buckets: neither eligible, nor stalled, nor waiting for cleanup", async () => {
      const tableId = await newTable(store, "paused");
      const [archived, hot, archiving] = await seed(tableId, [2019, 2020, 2021]);
      await advanceTo(store, archived!, "cleanup");
      await advanceTo(store, archiving!, "export");
      await store.setPaused(tableId, true, now);

      expect(summary(await store.peekCandidates(query()))).toEqual([]);
      expect(hot).toBeDefined();

      await store.setPaused(tableId, false, now);
      expect(summary(await store.peekCandidates(query()))).toEqual([
        "cleanup:1:year:2019",
        "eligible:1:year:2020",
        "stalled:1:year:2021",
      ]);
    });

    it("offers a restore cut off after its mark once nobody holds its lease (never as a cleanup), not one running, nor a paused table's, and counts it as cut off", async () => {
      const tableId = await newTable(store, "restoring");
      const [marked, archived] = await seed(tableId, [2019, 2020]);
      await advanceTo(store, marked!, "cleanup");
      await advanceTo(store, archived!, "cleanup");
      const markedAt = later(now, -1_000);
      committed(await store.beginRestore(await acquire(store, marked!, markedAt), markedAt, 0));

      // The restorer's lease is live: it is running, neither offered nor cut off.
      expect(summary(await store.peekCandidates(query()))).toEqual(["cleanup:1:year:2020"]);
      expect((await store.cutOffRestores(now, { limit: 10 })).total).toBe(0);

      const expired = later(markedAt, LEASE_MS);
      expect(summary(await store.peekCandidates(query({ now: expired })))).toEqual([
        "restore:1:year:2019",
        "cleanup:1:year:2020",
      ]);
      expect(await store.cutOffRestores(expired, { limit: 10 })).toEqual({
        total: 1,
        oldestMarkedAt: markedAt,
        buckets: [{ id: marked, markedAt, quarantined: false }],
      });
      expect(await store.cutOffRestores(expired, { limit: 0 })).toMatchObject({
        total: 1,
        buckets: [],
      });

      await store.setPaused(tableId, true, now);
      expect(summary(await store.peekCandidates(query({ now: expired })))).toEqual([]);
      expect((await store.cutOffRestores(expired, { limit: 10 })).total).toBe(1);
      await store.setPaused(tableId, false, now);
    });

    it("returns at most the limit, keeping the oldest", async () => {
      const tableId = await newTable(store, "limit");
      for (let p = 1; p <= 3; p++) await seed(tableId, [2016, 2017, 2018, 2019, 2020], p);
      await advanceTo(store, { tableId, partitionKey: bytes(2), bucketKey: "year:2016" }, "export");

      const candidates = await store.peekCandidates(query({ limit: 4 }));

      expect(candidates).toHaveLength(4);
      expect(candidates.slice(0, 3).map((c) => c.id.bucketKey)).toEqual([
        "year:2016",
        "year:2016",
        "year:2016",
      ]);
      expect(candidates[3]?.id.bucketKey).toBe("year:2017");
      expect(candidates.map((c) => c.kind).sort()).toEqual([
        "eligible",
        "eligible",
        "eligible",
        "stalled",
      ]);
    });

    it("stamps enqueued_at on discovered buckets, hiding them until enqueuedBefore passes the stamp; peeking stamps nothing", async () => {
      const tableId = await newTable(store, "stamp");
      await seed(tableId, [2019, 2020]);

      expect(await store.peekCandidates(query())).toHaveLength(2);
      expect(await store.peekCandidates(query())).toHaveLength(2);

      const discovered = await store.discover(query({ limit: 1 }));
      expect(summary(discovered)).toEqual(["eligible:1:year:2019"]);
      expect(discovered[0]?.enqueuedAt).toEqual(now);
      expect((await store.getBucket(discovered[0]!.id))?.enqueuedAt).toEqual(now);

      const next = later(now, 5_000);
      expect(
        summary(await store.discover(query({ now: next, enqueuedBefore: later(now, -1) }))),
      ).toEqual(["eligible:1:year:2020"]);
      expect(
        await store.discover(query({ now: next, enqueuedBefore: later(now, 1_000) })),
      ).toHaveLength(1);
      expect(
        summary(await store.peekCandidates(query({ now: next, enqueuedBefore: next }))),
      ).toEqual(["eligible:1:year:2019", "eligible:1:year:2020"]);
    });

    it("offers a committed bucket whose hand-on was never reported sent once the grace has passed, inside the requeue window; a reported send, a later lease or discovery's own stamp hides it", async () => {
      const tableId = await newTable(store, "handon");
      const [unsent, sent, staleReport, leased] = await seed(tableId, [2016, 2017, 2018, 2019]);
      const exported = new Map<BucketId, BucketMetadata>();
      for (const id of [unsent!, sent!, staleReport!, leased!])
        exported.set(id, await advanceTo(store, id, "export"));
      expect(exported.get(unsent!)?.handOnUnsentSince).toEqual(NOW);
      const generationOf = (id: BucketId) => exported.get(id)!.generation;
      expect(
        await store.reportHandOnsSent([
          { bucket: sent!, generation: generationOf(sent!) },
          { bucket: staleReport!, generation: generationOf(staleReport!) - 1 },
        ]),
      ).toBe(1);
      await store.releaseLease(await acquire(store, leased!, now));
      // The claims' stamps are inside the requeue window: only an unsent hand-on past its grace shows.
      const window = { enqueuedBefore: later(NOW, -1) };

      expect(await store.peekCandidates(query(window))).toEqual([]);
      expect(
        await store.peekCandidates(query({ ...window, handOnBefore: later(NOW, -1) })),
      ).toEqual([]);
      const due = query({ ...window, handOnBefore: later(NOW, 30_000) });
      expect(summary(await store.peekCandidates(due))).toEqual([
        "stalled:1:year:2016",
        "stalled:1:year:2018",
      ]);
      expect(summary(await store.discover(due))).toEqual([
        "stalled:1:year:2016",
        "stalled:1:year:2018",
      ]);
      expect((await store.getBucket(unsent!))?.handOnUnsentSince).toBeNull();
      expect(await store.discover(due)).toEqual([]);
    });

    it("names the bucket that has waited longest between two phases with nobody on it, and none leased, deferred or paused", async () => {
      const quiet = await newTable(store, "stall");
      const [sealing, leased, deferred] = await seed(quiet, [2016, 2017, 2018]);
      await advanceTo(store, sealing!, "seal");
      // Touched a second after the others: its wait counts from then.
      await store.releaseLease(await acquire(store, sealing!, later(NOW, 1_000)));
      await advanceTo(store, leased!, "export");
      await acquire(store, leased!, now);
      await advanceTo(store, deferred!, "export");
      committed(
        await store.defer(await acquire(store, deferred!, now), now, later(now, 60_000), "blip"),
      );
      const paused = await newTable(store, "stall-paused");
      const [older] = await seed(paused, [2015]);
      await advanceTo(store, older!, "cleanup");
      await store.setPaused(paused, true, now);

      expect(await store.oldestStalled(now)).toEqual({
        id: sealing,
        state: "archiving",
        phase: "seal",
        since: later(NOW, 1_000),
      });
      await store.setPaused(paused, false, now);
      expect(await store.oldestStalled(now)).toMatchObject({ id: older, phase: "cleanup" });
      await store.releaseLease(await acquire(store, older!, now));
      expect(await store.oldestStalled(now)).toMatchObject({ id: sealing });
    });

    it("pages a run of buckets sharing one bucket_end by keyset, each candidate exactly once and none rescanned", async () => {
      const tableId = await newTable(store, "keyset");
      for (let p = 1; p <= 7; p++) await seed(tableId, [2019], p);
      const seen: string[] = [];
      let after: DiscoveryQuery["after"] = undefined;
      for (let pages = 0; pages < 5; pages++) {
        // enqueuedBefore far back would not hide stamped rows: only the cursor moves the page on.
        const page = await store.peekCandidates(query({ limit: 3, after }));
        if (page.length === 0) break;
        seen.push(...summary(page));
        const last = page[page.length - 1]!;
        after = { eligible: { end: last.end, id: last.id } };
      }
      expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7].map((p) => `eligible:${p}:year:2019`));
    });

    it("keeps each kind's cursor apart: a page after the eligible cursor still starts stalled and cleanup from their oldest", async () => {
      const tableId = await newTable(store, "cursors");
      const [archived, archiving] = await seed(tableId, [2016, 2017], 1);
      await seed(tableId, [2018, 2019], 2);
      await advanceTo(store, archived!, "cleanup");
      await advanceTo(store, archiving!, "seal");
      const after = {
        eligible: {
          end: at("2019-01-01T00:00:00Z"),
          id: { tableId, partitionKey: bytes(2), bucketKey: "year:2018" },
        },
      };
      expect(summary(await store.peekCandidates(query({ after })))).toEqual([
        "cleanup:1:year:2016",
        "stalled:1:year:2017",
        "eligible:2:year:2019",
      ]);
    });

    it("shares a page between the kinds: a backlog of older stalled buckets does not crowd out new claims, nor claims the cleanups", async () => {
      const tableId = await newTable(store, "fair");
      const stalled: BucketId[] = [];
      for (let p = 1; p <= 6; p++) stalled.push(...(await seed(tableId, [2015], p)));
      for (const id of stalled) await advanceTo(store, id, "export");
      const [archived] = await seed(tableId, [2024], 9);
      await advanceTo(store, archived!, "cleanup");
      for (let p = 10; p <= 15; p++) await seed(tableId, [2016], p);

      const page = summary(await store.discover(query({ limit: 6 })));

      expect(page.filter((c) => c.startsWith("stalled"))).toHaveLength(3);
      expect(page.filter((c) => c.startsWith("eligible"))).toHaveLength(2);
      expect(page).toContain("cleanup:9:year:2024");
    });
  });
}
