/**
 * Hot store conformance: restore and the references garbage collection keeps.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { BucketNotWritableError, RecordConflictError } from "../../../src/errors.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import {
  acquire,
  advanceTo,
  bytes,
  committed,
  hotBucket,
  LEASE_MS,
  later,
  newTable,
  NOW,
  PAYLOAD,
  rec,
  text,
} from "./support.js";

export function restoreConformance(opened: () => HotStore): void {
  describe("restore and archive references", () => {
    let store: HotStore;

    beforeAll(() => {
      store = opened();
    });

    /** An archived bucket of three records whose hot rows were cleaned up, and those rows. */
    async function archivedAndCleaned(label: string) {
      const tableId = await newTable(store, label);
      const id = await hotBucket(store, tableId);
      const read = await store.readBucket(id, { limit: 100 });
      if (read.route !== "hot") throw new Error("expected a hot bucket");
      await advanceTo(store, id, "cleanup");
      const lease = await acquire(store, id);
      expect(await store.cleanupBatch(lease, NOW, 100)).toEqual({ kind: "deleted", count: 3 });
      committed(await store.finishCleanup(lease, NOW));
      return { tableId, id, rows: [...read.rows] };
    }

    it("restores an archived bucket: marked, rows back idempotently, then one flip to hot only when every row is present", async () => {
      const { tableId, id, rows } = await archivedAndCleaned("restore");
      const lease = await acquire(store, id);

      const marked = committed(await store.beginRestore(lease, NOW, 3_600_000));
      expect(marked.metadata).toMatchObject({
        state: "archived",
        restoreStartedAt: NOW,
        restoreHoldMs: 3_600_000,
        ownerToken: lease.token,
      });
      committed(await store.beginRestore(lease, later(NOW, 1_000)));
      expect((await store.getBucket(id))!).toMatchObject({
        restoreStartedAt: NOW,
        restoreHoldMs: 3_600_000,
      });
      committed(await store.beginRestore(lease, later(NOW, 2_000), 0));
      expect((await store.getBucket(id))!).toMatchObject({
        restoreStartedAt: NOW,
        restoreHoldMs: 0,
      });
      // Its lease is live: a restore running, not cut off.
      expect((await store.cutOffRestores(NOW, { tableId, limit: 10 })).total).toBe(0);
      expect(
        (await store.cutOffRestores(later(NOW, LEASE_MS), { tableId, limit: 10 })).buckets,
      ).toEqual([{ id, markedAt: NOW, quarantined: false }]);
      expect((await store.readBucket(id, { limit: 100 })).route).toBe("archive");
      await expect(
        store.append(tableId, [rec("2023-05-05T00:00:00Z", "new", "1")], NOW),
      ).rejects.toThrow(BucketNotWritableError);

      expect(await store.restoreRecords(lease, NOW, rows.slice(0, 2))).toEqual({
        kind: "inserted",
        inserted: 2,
        verified: 0,
      });
      expect(await store.finishRestore(lease, NOW, later(NOW, 1_000))).toEqual({
        kind: "rows-mismatch",
        hotRows: 2,
        expected: 3,
      });
      expect((await store.readBucket(id, { limit: 100 })).route).toBe("archive");
      expect(await store.restoreRecords(lease, NOW, rows)).toEqual({
        kind: "inserted",
        inserted: 1,
        verified: 2,
      });
      const changed = { ...rows[0]!, value: text("another value") };
      await expect(store.restoreRecords(lease, NOW, [changed])).rejects.toThrow(
        RecordConflictError,
      );

      const retryAt = later(NOW, 7 * 86_400_000);
      const flipped = await store.finishRestore(lease, NOW, retryAt);
      expect(flipped).toMatchObject({
        kind: "committed",
        metadata: {
          state: "hot",
          phase: "claim",
          exported: null,
          manifestKey: null,
          hotDeleted: false,
          restoreStartedAt: null,
          restoreHoldMs: null,
          ownerToken: null,
          attempts: 0,
          retryAt,
          dereferencedAt: NOW,
        },
      });
      const read = await store.readBucket(id, { limit: 100 });
      expect(read.route === "hot" ? read.rows : read).toEqual(rows);
    });

    it("a restore's flip to hot releases a quarantined bucket: quarantine cleared, attempts and outage deferrals 0, only the hold's retry pending", async () => {
      const { id, rows } = await archivedAndCleaned("restore-quarantined");
      // Archived buckets take an attempt only from a takeover (a killed cleanup, say).
      await acquire(store, id);
      const killed = await acquire(store, id, later(NOW, LEASE_MS + 1));
      const at = later(NOW, LEASE_MS + 2);
      committed(await store.quarantine(killed, at, "quarantined after 1 failed attempts"));
      expect((await store.getBucket(id))!).toMatchObject({ attempts: 1 });
      expect((await store.getBucket(id))!.quarantinedAt).toEqual(at);

      const lease = await acquire(store, id, at);
      committed(await store.beginRestore(lease, at));
      await store.restoreRecords(lease, at, rows);
      const retryAt = later(at, 60_000);
      const flipped = committed(await store.finishRestore(lease, at, retryAt));
      expect(flipped.metadata).toMatchObject({
        state: "hot",
        quarantinedAt: null,
        attempts: 0,
        outageDeferrals: 0,
        retryAt,
        lastError: null,
      });
    });

    it("fences restore like archival: no mark on a hot bucket, nothing from a stale owner, no cleanup while restoring", async () => {
      const tableId = await newTable(store, "restore-fence");
      const hot = await hotBucket(store, tableId, bytes(7));
      expect((await store.beginRestore(await acquire(store, hot), NOW)).kind).toBe("lease-lost");

      // Archived but not cleaned up: the restore must keep cleanup away from its rows.
      const id = await hotBucket(store, tableId, bytes(8));
      const read = await store.readBucket(id, { limit: 100 });
      if (read.route !== "hot") throw new Error("expected a hot bucket");
      await advanceTo(store, id, "cleanup");
      const first = await acquire(store, id);
      committed(await store.beginRestore(first, NOW));

      const expiry = later(NOW, LEASE_MS);
      const second = await acquire(store, id, expiry);
      expect(await store.restoreRecords(first, expiry, read.rows)).toMatchObject({
        kind: "lease-lost",
      });
      expect(await store.finishRestore(first, expiry, expiry)).toMatchObject({
        kind: "lease-lost",
      });
      expect((await store.cleanupBatch(second, expiry, 100)).kind).toBe("lease-lost");
      expect(await store.countHotRows(id)).toBe(3);

      expect(await store.restoreRecords(second, expiry, read.rows)).toEqual({
        kind: "inserted",
        inserted: 0,
        verified: 3,
      });
      expect((await store.finishRestore(second, expiry, expiry)).kind).toBe("committed");
    });

    it("lists a table's archive references page by page in key order, flagging buckets in flight", async () => {
      const tableId = await newTable(store, "refs");
      const other = await newTable(store, "refs-other");
      await hotBucket(store, other, bytes(1));
      const ids: BucketId[] = [];
      for (const k of [3, 1, 2, 4]) ids.push(await hotBucket(store, tableId, bytes(k)));
      const [p3, p1, p2, p4] = ids as [BucketId, BucketId, BucketId, BucketId];
      await advanceTo(store, p1, "cleanup"); // archived with payload and manifest
      await advanceTo(store, p2, "export"); // archiving: in flight
      await acquire(store, p4); // hot but leased: in flight

      const seen = [];
      let after: { partitionKey: Uint8Array; bucketKey: string } | null = null;
      for (;;) {
        const page = await store.listArchiveReferences(tableId, after, 3, NOW);
        seen.push(...page);
        if (page.length < 3) break;
        const last = page[page.length - 1]!;
        after = { partitionKey: last.id.partitionKey, bucketKey: last.id.bucketKey };
      }
      expect(
        seen.map((r) => [r.id.partitionKey[0], r.state, r.payloadKeys, r.manifestKey, r.inFlight]),
      ).toEqual([
        [1, "archived", [PAYLOAD.key], "m/manifest.json", false],
        [2, "archiving", [], null, true],
        [3, "hot", [], null, false],
        [4, "hot", [], null, true],
      ]);
      expect(seen.every((r) => r.id.tableId === tableId)).toBe(true);
      expect(p3.bucketKey).toBe("year:2023");
      // Once the lease has expired the leased bucket is no longer in flight.
      const afterExpiry = await store.listArchiveReferences(
        tableId,
        null,
        10,
        later(NOW, LEASE_MS + 1),
      );
      expect(afterExpiry.find((r) => r.id.partitionKey[0] === 4)!.inFlight).toBe(false);
    });
  });
}
