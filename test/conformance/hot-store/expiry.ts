/**
 * Hot store conformance: expiry's fenced writes (ports/bucket-expiry.ts).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { parseDuration } from "../../../src/domain/duration.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import { acquire, advanceTo, committed, hotBucket, later, newTable, NOW } from "./support.js";

export function expiryConformance(opened: () => HotStore): void {
  describe("expiry", () => {
    let store: HotStore;

    beforeAll(() => {
      store = opened();
    });

    /** An archived bucket of year 2023 whose hot rows were cleaned up, in a table of its own. */
    async function archivedAndCleaned(label: string) {
      const tableId = await newTable(store, label);
      await store.alterTable(
        tableId,
        { archiveAfter: parseDuration("30d"), expireAfter: parseDuration("1y") },
        NOW,
      );
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "cleanup");
      const lease = await acquire(store, id);
      expect(await store.cleanupBatch(lease, NOW, 100)).toMatchObject({ kind: "deleted" });
      committed(await store.finishCleanup(lease, NOW));
      const version = (await store.getTable(tableId))!.policyVersion;
      return { tableId, id, due: { expireCutoff: NOW, policyVersion: version } };
    }

    it("expires in two fenced steps: the mark keeps reads on the archive and refuses a restore; the finish drops every reference and reads say expired", async () => {
      const { id, due } = await archivedAndCleaned("expire");
      const before = (await store.getBucket(id))!;
      const lease = await acquire(store, id);
      const marked = committed(await store.beginExpiry(lease, NOW, due));
      expect(marked.metadata).toMatchObject({
        state: "archived",
        expiryStartedAt: NOW,
        ownerToken: null,
        enqueuedAt: NOW,
      });
      expect((await store.readBucket(id, { limit: 10 })).route).toBe("archive");
      const restorer = await acquire(store, id, later(NOW, 1));
      expect((await store.beginRestore(restorer, later(NOW, 1))).kind).toBe("lease-lost");
      await store.releaseLease(restorer);

      const finisher = await acquire(store, id, later(NOW, 2));
      const done = committed(await store.finishExpiry(finisher, later(NOW, 3)));
      expect(done.metadata).toMatchObject({
        state: "expired",
        phase: "done",
        exported: null,
        manifestKey: null,
        expiryStartedAt: null,
        ownerToken: null,
        dereferencedAt: later(NOW, 3),
        expiry: {
          at: later(NOW, 3),
          rows: 3,
          releasedObjects: 2,
          releasedBytes: before.exported!.byteLength,
        },
      });
      expect(await store.listParts(id)).toEqual([]);
      expect(await store.readBucket(id, { limit: 10 })).toEqual({
        route: "expired",
        expiredAt: later(NOW, 3),
      });
      const refs = await store.listArchiveReferences(id.tableId, null, 10, later(NOW, 4));
      expect(refs).toEqual([
        expect.objectContaining({ state: "expired", manifestKey: null, payloadKeys: [] }),
      ]);
    });

    it("refuses the mark under another policy version, for a paused table, a bucket being restored or not yet due", async () => {
      const { tableId, id, due } = await archivedAndCleaned("expire-refused");
      const tryMark = async (d = due) => {
        const lease = await acquire(store, id);
        const result = await store.beginExpiry(lease, NOW, d);
        await store.releaseLease(lease);
        return result.kind;
      };
      expect(await tryMark({ ...due, policyVersion: due.policyVersion + 1 })).toBe("lease-lost");
      expect(await tryMark({ ...due, expireCutoff: new Date("2023-12-31T00:00:00Z") })).toBe(
        "lease-lost",
      );
      await store.setPaused(tableId, true, NOW);
      const paused = (await store.getTable(tableId))!.policyVersion;
      expect(await tryMark({ ...due, policyVersion: paused })).toBe("lease-lost");
      await store.setPaused(tableId, false, NOW);
      const resumed = (await store.getTable(tableId))!.policyVersion;

      const restorer = await acquire(store, id);
      committed(await store.beginRestore(restorer, NOW));
      await store.releaseLease(restorer);
      expect(await tryMark({ ...due, policyVersion: resumed })).toBe("lease-lost");
      expect((await store.getBucket(id))!.expiryStartedAt).toBeNull();
    });

    it("finishes only a marked bucket under a live lease", async () => {
      const { id, due } = await archivedAndCleaned("expire-finish");
      const unmarked = await acquire(store, id);
      expect((await store.finishExpiry(unmarked, NOW)).kind).toBe("lease-lost");
      committed(await store.beginExpiry(unmarked, NOW, due));
      const stale = unmarked;
      expect((await store.finishExpiry(stale, NOW)).kind).toBe("lease-lost");
      expect((await store.getBucket(id))!.state).toBe("archived");
    });

    it("holds a due bucket with a retry time, keeping its attempts, and remembers since when", async () => {
      const { id, due } = await archivedAndCleaned("expire-hold");
      const retryAt = later(NOW, 86_400_000);
      const lease = await acquire(store, id);
      const held = committed(await store.holdExpiry(lease, NOW, retryAt, "under a legal hold"));
      expect(held.metadata).toMatchObject({
        state: "archived",
        retryAt,
        lastError: "under a legal hold",
        expiryBlockedSince: NOW,
        attempts: 0,
        ownerToken: null,
      });
      const again = await acquire(store, id, later(NOW, 5));
      committed(await store.holdExpiry(again, later(NOW, 5), retryAt, "still held"));
      expect((await store.getBucket(id))!.expiryBlockedSince).toEqual(NOW);
      const marker = await acquire(store, id, later(NOW, 6));
      const marked = committed(await store.beginExpiry(marker, later(NOW, 6), due));
      expect(marked.metadata).toMatchObject({
        expiryBlockedSince: null,
        retryAt: null,
        lastError: null,
      });
    });

    it("forgets since when a bucket was held once its table's expire_after changes: the blocked clock starts over under the new window, and another change keeps it", async () => {
      const { tableId, id } = await archivedAndCleaned("expire-hold-change");
      const lease = await acquire(store, id);
      committed(await store.holdExpiry(lease, NOW, later(NOW, 86_400_000), "under a legal hold"));
      await store.alterTable(tableId, { storageClass: "STANDARD_IA" }, later(NOW, 1));
      const afterOther = (await store.getBucket(id))!.expiryBlockedSince;
      await store.alterTable(tableId, { expireAfter: null }, later(NOW, 2));
      const afterUnset = (await store.getBucket(id))!.expiryBlockedSince;

      expect(afterOther).toEqual(NOW);
      expect(afterUnset).toBeNull();
    });
  });
}
