/**
 * Hot store conformance: taking, renewing and releasing bucket leases.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { HotStore, Lease, PhaseName } from "../../../src/ports/hot-store.js";
import { OUTAGE_FAILURE } from "../../../src/ports/failure-runs.js";
import {
  acquire,
  advanceTo,
  bytes,
  CUTOFF,
  hotBucket,
  LEASE_MS,
  later,
  newTable,
  NOW,
} from "./support.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

export function leaseConformance(opened: () => HotStore): void {
  describe("leases", () => {
    let store: HotStore;

    beforeAll(() => {
      store = opened();
    });

    it("grants a lease once, reports busy while it lives, and lets a takeover after expiry bump the generation", async () => {
      const tableId = await newTable(store, "lease");
      const id = await hotBucket(store, tableId);

      const first = await store.acquireLease(id, NOW, LEASE_MS);
      expect(first.kind).toBe("acquired");
      if (first.kind !== "acquired") return;
      expect(first.lease.generation).toBe(1);
      expect(first.lease.expiresAt).toEqual(later(NOW, LEASE_MS));
      expect(first.metadata.ownerToken).toBe(first.lease.token);

      const busy = await store.acquireLease(id, later(NOW, LEASE_MS - 1), LEASE_MS);
      expect(busy.kind).toBe("busy");
      if (busy.kind === "busy") expect(busy.metadata.ownerToken).toBe(first.lease.token);

      const takeover = await store.acquireLease(id, later(NOW, LEASE_MS), LEASE_MS);
      expect(takeover.kind).toBe("acquired");
      if (takeover.kind !== "acquired") return;
      expect(takeover.lease.generation).toBe(2);
      expect(takeover.lease.token).not.toBe(first.lease.token);
    });

    it("reports missing for a bucket that was never written", async () => {
      const tableId = await newTable(store, "missing");
      expect(
        await store.acquireLease(
          { tableId, partitionKey: bytes(1), bucketKey: "year:2023" },
          NOW,
          1,
        ),
      ).toEqual({ kind: "missing" });
    });

    it("extends a live lease on renewal and frees the bucket on release", async () => {
      const tableId = await newTable(store, "renew");
      const id = await hotBucket(store, tableId);
      const lease = await acquire(store, id);

      const renewed = await store.renewLease(lease, later(NOW, 50_000), LEASE_MS);
      expect(renewed.kind).toBe("renewed");
      if (renewed.kind !== "renewed") return;
      expect(renewed.lease.expiresAt).toEqual(later(NOW, 110_000));
      expect((await store.acquireLease(id, later(NOW, 100_000), LEASE_MS)).kind).toBe("busy");

      await store.releaseLease(renewed.lease);
      expect((await store.getBucket(id))?.ownerToken).toBeNull();
      const next = await acquire(store, id, later(NOW, 1));
      expect(next.generation).toBe(2);

      await store.releaseLease(lease);
      expect((await store.getBucket(id))?.ownerToken).toBe(next.token);
    });

    const staleCases: Array<{
      op: string;
      phase: PhaseName;
      run: (s: HotStore, lease: Lease, now: Date) => Promise<{ kind: string }>;
    }> = [
      { op: "renewLease", phase: "claim", run: (s, l, n) => s.renewLease(l, n, LEASE_MS) },
      { op: "claim", phase: "claim", run: (s, l, n) => s.claim(l, n, fixedCutoffs(CUTOFF)) },
      { op: "snapshotPage", phase: "export", run: (s, l, n) => s.snapshotPage(l, n, null, 10) },
      { op: "finishExport", phase: "export", run: (s, l, n) => s.finishExport(l, n, 1) },
      {
        op: "recordManifest",
        phase: "seal",
        run: (s, l, n) => s.recordManifest(l, n, "m/x.json"),
      },
      { op: "publish", phase: "publish", run: (s, l, n) => s.publish(l, n) },
      { op: "cleanupBatch", phase: "cleanup", run: (s, l, n) => s.cleanupBatch(l, n, 10) },
      { op: "finishCleanup", phase: "cleanup", run: (s, l, n) => s.finishCleanup(l, n) },
    ];

    it.each(staleCases)(
      "refuses $op from a stale owner, whether its lease expired or a newer generation took over",
      async ({ phase, run }) => {
        const tableId = await newTable(store, "stale");
        const id = await hotBucket(store, tableId);
        const before = await advanceTo(store, id, phase);
        const stale = await acquire(store, id);

        const expired = await run(store, stale, later(NOW, LEASE_MS));
        expect(expired.kind).toBe("lease-lost");

        const current = await acquire(store, id, later(NOW, LEASE_MS));
        expect(current.generation).toBe(stale.generation + 1);
        const superseded = await run(store, stale, later(NOW, 1_000));
        expect(superseded).toMatchObject({
          kind: "lease-lost",
          metadata: { ownerToken: current.token },
        });

        const after = await store.getBucket(id);
        expect(after).toMatchObject({
          state: before.state,
          phase: before.phase,
          generation: current.generation,
          ownerToken: current.token,
          // Taking over the expired, unreleased lease counted as a failed attempt.
          attempts: before.attempts + 1,
          hotDeleted: false,
        });
        if (phase === "cleanup") {
          const lease = await acquire(store, id, later(NOW, 10 * LEASE_MS));
          expect(await store.cleanupBatch(lease, later(NOW, 10 * LEASE_MS), 100)).toEqual({
            kind: "deleted",
            count: 3,
          });
        }
      },
    );

    const failureRecords: Array<{
      op: string;
      phase: PhaseName;
      run: (s: HotStore, lease: Lease, now: Date) => Promise<{ kind: string }>;
      after: { state: string; phase: string };
    }> = [
      {
        op: "defer",
        phase: "export",
        run: (s, l, n) => s.defer(l, n, later(n, 5_000), "boom", OUTAGE_FAILURE),
        after: { state: "hot", phase: "claim" },
      },
      {
        op: "suspendExport",
        phase: "export",
        run: (s, l, n) => s.suspendExport(l, n, later(n, 5_000), "boom", OUTAGE_FAILURE),
        after: { state: "archiving", phase: "export" },
      },
      {
        op: "deferCleanup",
        phase: "cleanup",
        run: (s, l, n) => s.deferCleanup(l, n, later(n, 5_000), "boom", OUTAGE_FAILURE),
        after: { state: "archived", phase: "cleanup" },
      },
    ];

    it.each(failureRecords)(
      "$op lands under a lease that expired while nobody took over (the outage it records kept the worker from it), counting no attempt",
      async ({ phase, run, after }) => {
        const tableId = await newTable(store, "late-record");
        const id = await hotBucket(store, tableId);
        const before = await advanceTo(store, id, phase);
        const lease = await acquire(store, id);

        const recorded = await run(store, lease, later(NOW, 5 * LEASE_MS));
        expect(recorded.kind).toBe("committed");
        expect(await store.getBucket(id)).toMatchObject({
          ...after,
          generation: lease.generation,
          ownerToken: null,
          attempts: before.attempts,
          outageDeferrals: before.outageDeferrals + 1,
          lastError: "boom",
          failedAt: later(NOW, 5 * LEASE_MS),
        });
        // The next worker takes a released lease: no takeover to count.
        expect((await acquire(store, id, later(NOW, 6 * LEASE_MS))).generation).toBe(
          lease.generation + 1,
        );
        expect((await store.getBucket(id))?.attempts).toBe(before.attempts);
      },
    );

    it.each(failureRecords)(
      "$op is refused once a newer generation took the expired lease over, and changes nothing",
      async ({ phase, run }) => {
        const tableId = await newTable(store, "late-refused");
        const id = await hotBucket(store, tableId);
        await advanceTo(store, id, phase);
        const stale = await acquire(store, id);
        const current = await acquire(store, id, later(NOW, LEASE_MS));
        const taken = (await store.getBucket(id))!;

        const refused = await run(store, stale, later(NOW, LEASE_MS + 1_000));
        expect(refused).toMatchObject({
          kind: "lease-lost",
          metadata: { ownerToken: current.token },
        });
        expect(await store.getBucket(id)).toEqual(taken);
      },
    );
  });
}
