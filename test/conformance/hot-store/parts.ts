/**
 * Conformance: the part records of a segmented export (recordPart,
 * listParts, finishExport), and what deferral and GC's reference set do
 * with them.
 */
import { describe, expect, it } from "vitest";
import { InvariantViolationError } from "../../../src/errors.js";
import type { BucketPart, HotStore } from "../../../src/ports/hot-store.js";
import { OUTAGE_FAILURE } from "../../../src/ports/failure-runs.js";
import {
  acquire,
  advanceTo,
  bytes,
  committed,
  hotBucket,
  later,
  LEASE_MS,
  newTable,
  NOW,
} from "./support.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const micros = (iso: string) => BigInt(Date.parse(iso)) * 1000n;

function part(index: number, rows = 2): BucketPart {
  return {
    index,
    key: `p/part-${index}.json`,
    sha256: String(index % 10).repeat(64),
    rowCount: rows,
    byteLength: 100 + index,
    first: {
      eventTime: micros("2023-03-01T00:00:00Z") + BigInt(index * 10),
      sortKey: bytes(0, index),
    },
    last: {
      eventTime: micros("2023-03-01T00:00:00Z") + BigInt(index * 10 + 3),
      sortKey: bytes(0xff, 0, index),
    },
  };
}

export function partConformance(getStore: () => HotStore): void {
  describe("export parts", () => {
    it("records part k only under the export lease and only right after part k-1", async () => {
      const store = getStore();
      const id = await hotBucket(store, await newTable(store, "parts-order"));
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);

      expect(await store.recordPart(lease, NOW, part(1))).toEqual({
        kind: "out-of-order",
        recorded: 0,
      });
      expect(await store.recordPart(lease, NOW, part(0))).toEqual({ kind: "recorded" });
      expect(await store.recordPart(lease, NOW, part(0))).toEqual({
        kind: "out-of-order",
        recorded: 1,
      });
      expect((await store.recordPart(lease, later(NOW, LEASE_MS), part(1))).kind).toBe(
        "lease-lost",
      );
      expect(await store.listParts(id)).toEqual([part(0)]);
      // The lease is kept: the same owner goes on recording.
      expect(await store.recordPart(lease, NOW, part(1))).toEqual({ kind: "recorded" });
      expect(await store.listParts(id)).toEqual([part(0), part(1)]);
    });

    it("refuses a part from a stale owner after a takeover, which keeps the recorded parts", async () => {
      const store = getStore();
      const id = await hotBucket(store, await newTable(store, "parts-stale"));
      await advanceTo(store, id, "export");
      const stale = await acquire(store, id);
      expect((await store.recordPart(stale, NOW, part(0))).kind).toBe("recorded");
      const takeoverAt = later(NOW, LEASE_MS + 1);
      const rival = await acquire(store, id, takeoverAt);
      expect((await store.recordPart(stale, NOW, part(1))).kind).toBe("lease-lost");
      expect(await store.listParts(id)).toEqual([part(0)]);
      expect((await store.recordPart(rival, takeoverAt, part(1))).kind).toBe("recorded");
    });

    it("finishes an export of several parts with their totals, phase seal and the lease released", async () => {
      const store = getStore();
      const id = await hotBucket(store, await newTable(store, "parts-finish"));
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);
      for (const i of [0, 1, 2]) await store.recordPart(lease, NOW, part(i));

      await expect(store.finishExport(lease, NOW, 2)).rejects.toThrow(InvariantViolationError);
      const finished = committed(await store.finishExport(lease, NOW, 3));
      expect(finished.metadata).toMatchObject({
        state: "archiving",
        phase: "seal",
        exported: { parts: 3, rowCount: 6, byteLength: 303 },
        ownerToken: null,
      });
      expect(await store.listParts(id)).toHaveLength(3);
      expect((await store.finishExport(await acquire(store, id), NOW, 3)).kind).toBe("lease-lost");
    });

    it("finishes an export of one part with its totals and lists that part alone, as part 0 with no keys kept", async () => {
      const store = getStore();
      const id = await hotBucket(store, await newTable(store, "parts-single"));
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);
      await store.recordPart(lease, NOW, part(0, 3));
      const finished = committed(await store.finishExport(lease, NOW, 1));
      const only = part(0, 3);
      expect(finished.metadata).toMatchObject({
        phase: "seal",
        exported: { parts: 1, rowCount: only.rowCount, byteLength: only.byteLength },
      });
      expect(await store.listParts(id)).toEqual([{ ...only, first: null, last: null }]);
    });

    it("finishes a one-part export with its part in the same write: listed as part 0, read back with the metadata, the lease released", async () => {
      const store = getStore();
      const id = await hotBucket(store, await newTable(store, "parts-only"));
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);
      const only = part(0, 3);
      const finished = committed(await store.finishExport(lease, NOW, 1, only));
      const listed = { ...only, first: null, last: null };
      expect(finished.metadata).toMatchObject({
        state: "archiving",
        phase: "seal",
        exported: { parts: 1, rowCount: only.rowCount, byteLength: only.byteLength, only: listed },
        ownerToken: null,
        generation: lease.generation,
      });
      expect(await store.listParts(id)).toEqual([listed]);
      // What a reader of the metadata gets is what the part list says.
      expect((await store.getBucket(id))!.exported!.only).toEqual(listed);
      // Done once: the same lease, or a later one, finds the fence gone.
      expect((await store.finishExport(lease, NOW, 1, only)).kind).toBe("lease-lost");
    });

    it("refuses a one-part finish when a part is already recorded (a resumed export's view is stale), and from a stale owner after a takeover", async () => {
      const store = getStore();
      const id = await hotBucket(store, await newTable(store, "parts-only-refused"));
      await advanceTo(store, id, "export");
      const stale = await acquire(store, id);
      expect((await store.recordPart(stale, NOW, part(0))).kind).toBe("recorded");
      await expect(store.finishExport(stale, NOW, 1, part(0, 5))).rejects.toThrow(
        /1 parts are recorded/,
      );
      await expect(store.finishExport(stale, NOW, 2, part(1))).rejects.toThrow(
        InvariantViolationError,
      );
      expect(await store.listParts(id)).toEqual([part(0)]);

      const takeoverAt = later(NOW, LEASE_MS + 1);
      const rival = await acquire(store, id, takeoverAt);
      expect((await store.finishExport(stale, NOW, 1, part(0, 5))).kind).toBe("lease-lost");
      expect(await store.getBucket(id)).toMatchObject({ phase: "export", exported: null });
      // The rival resumes after the recorded part and finishes the two-step way.
      expect((await store.recordPart(rival, takeoverAt, part(1))).kind).toBe("recorded");
      const finished = committed(await store.finishExport(rival, takeoverAt, 2));
      expect(finished.metadata.exported).toMatchObject({ parts: 2 });
      expect(finished.metadata.exported!.only).toBeUndefined();
    });

    it("deferral deletes the part records in its fenced transaction and stamps the dereference time", async () => {
      const store = getStore();
      const id = await hotBucket(store, await newTable(store, "parts-defer"));
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);
      await store.recordPart(lease, NOW, part(0));
      await store.recordPart(lease, NOW, part(1));

      // A failure record needs the lease's token and generation, not an unexpired lease (leases.ts).
      const rival = { ...lease, token: "someone-else" };
      expect((await store.defer(rival, NOW, NOW, "not ours")).kind).toBe("lease-lost");
      expect(await store.listParts(id)).toHaveLength(2);

      const deferred = committed(await store.defer(lease, NOW, later(NOW, 1000), "boom"));
      expect(deferred.metadata).toMatchObject({ state: "hot", phase: "claim", attempts: 1 });
      expect(deferred.metadata.dereferencedAt).toEqual(NOW);
      expect(await store.listParts(id)).toEqual([]);
    });

    it("suspending an export keeps its part records, counts the attempt, records the error, releases the lease, and holds the bucket back from discovery until its retry time", async () => {
      const store = getStore();
      const tableId = await newTable(store, "parts-suspend");
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);
      await store.recordPart(lease, NOW, part(0));
      await store.recordPart(lease, NOW, part(1));

      const rival = { ...lease, generation: lease.generation - 1 };
      expect((await store.suspendExport(rival, NOW, NOW, "not ours")).kind).toBe("lease-lost");
      const retryAt = later(NOW, 5000);
      const suspended = committed(await store.suspendExport(lease, NOW, retryAt, "S3 timed out"));
      expect(suspended.metadata).toMatchObject({
        state: "archiving",
        phase: "export",
        attempts: 1,
        retryAt,
        lastError: "S3 timed out",
        ownerToken: null,
        dereferencedAt: null,
      });
      expect(await store.listParts(id)).toEqual([part(0), part(1)]);
      // The lease is gone: a second suspension under it is refused.
      expect((await store.suspendExport(lease, NOW, retryAt, "again")).kind).toBe("lease-lost");

      const offered = async (at: Date) =>
        (
          await store.peekCandidates({
            now: at,
            ...fixedCutoffs(at),
            enqueuedBefore: at,
            // The store is shared by the suite: other tests' buckets are candidates too.
            limit: 1_000,
          })
        )
          .filter((c) => c.id.tableId === tableId)
          .map((c) => c.kind);
      expect(await offered(later(NOW, 4999))).toEqual([]);
      expect(await offered(later(NOW, 5001))).toEqual(["stalled"]);

      // Outside the export phase it is refused and nothing changes.
      const next = await acquire(store, id, later(NOW, 5001));
      committed(await store.finishExport(next, later(NOW, 5001), 2));
      const sealing = await acquire(store, id, later(NOW, 5002));
      expect((await store.suspendExport(sealing, later(NOW, 5002), retryAt, "x")).kind).toBe(
        "lease-lost",
      );
      // The finished export is progress: its failure run starts over (fences.ts, PROGRESS).
      expect((await store.getBucket(id))!).toMatchObject({ phase: "seal", attempts: 0 });
    });

    it("suspending an export for an outage keeps its part records and counts an outage deferral, not an attempt", async () => {
      const store = getStore();
      const id = await hotBucket(store, await newTable(store, "parts-suspend-outage"));
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);
      await store.recordPart(lease, NOW, part(0));

      const retryAt = later(NOW, 5000);
      const suspended = committed(
        await store.suspendExport(lease, NOW, retryAt, "S3 refused", OUTAGE_FAILURE),
      );
      expect(suspended.metadata).toMatchObject({
        state: "archiving",
        phase: "export",
        attempts: 0,
        outageDeferrals: 1,
        retryAt,
        lastError: "S3 refused",
        ownerToken: null,
      });
      expect(await store.listParts(id)).toEqual([part(0)]);
    });

    it("GC's reference set names every recorded part and reports the exporting bucket in flight", async () => {
      const store = getStore();
      const tableId = await newTable(store, "parts-gc");
      const id = await hotBucket(store, tableId, bytes(7));
      await hotBucket(store, tableId, bytes(8));
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);
      await store.recordPart(lease, NOW, part(0));
      await store.recordPart(lease, NOW, part(1));
      await store.releaseLease(lease);

      const refs = await store.listArchiveReferences(tableId, null, 10, NOW);
      expect(refs.map((r) => [r.payloadKeys, r.inFlight])).toEqual([
        [[part(0).key, part(1).key], true],
        [[], false],
      ]);
    });
  });
}
