/**
 * Hot store conformance: the run of suspect failures and the records that
 * decide a quarantine (ports/failure-runs.ts, domain/quarantine-rule.ts).
 * Its evidence looks at every bucket (others archived, others failing
 * alike) and the lift at every quarantine, so these tests run on a store of
 * their own. The callers' `now` is the conformance suites' fixed instant;
 * the database's clock is the host's, and it alone must decide spans and
 * cool-downs.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { FailureAccounting } from "../../../src/ports/failure-runs.js";
import { OUTAGE_FAILURE, OWN_FAILURE } from "../../../src/ports/failure-runs.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import {
  acquire,
  advanceTo,
  bytes,
  committed,
  LEASE_MS,
  later,
  newTable,
  NOW,
  OPEN_TIMEOUT_MS,
  hotBucket,
  text,
  type OpenedHotStore,
} from "./support.js";

const LOAD_COUNTED: FailureAccounting = { counted: true, kind: "load" };
const LOAD_ALONE: FailureAccounting = { counted: false, kind: "load" };
const UNKNOWN_ALONE: FailureAccounting = { counted: false, kind: "unknown" };
const HOUR = 3_600_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function failureRunConformance(name: string, open: () => Promise<OpenedHotStore>): void {
  describe(`hot store failure run conformance: ${name}`, () => {
    let store: HotStore;
    let cleanup: () => Promise<void>;

    beforeAll(async () => {
      ({ store, cleanup } = await open());
      await store.migrate();
    }, OPEN_TIMEOUT_MS);

    afterAll(async () => {
      await cleanup?.();
    });

    /** A hot bucket of a new table, in phase export. */
    async function exporting(label: string, partition = bytes(1)): Promise<BucketId> {
      const id = await hotBucket(store, await newTable(store, label), partition);
      await advanceTo(store, id, "export");
      return id;
    }

    /** Record a failed export of `id` at `now` as `accounting` says (back to hot, retry due at NOW), then claim it again. */
    async function fail(id: BucketId, accounting: FailureAccounting, now = NOW): Promise<void> {
      committed(await store.defer(await acquire(store, id, now), now, NOW, "boom", accounting));
      await advanceTo(store, id, "export");
    }

    /** Quarantine `id` under a fresh lease, retrying itself after `cooldownMs` (null: held). */
    async function quarantined(id: BucketId, cooldownMs: number | null) {
      const m = (await store.getBucket(id))!;
      const lease = await acquire(store, id);
      return committed(
        await store.quarantine(lease, NOW, "quarantined (test)", {
          attempts: m.attempts,
          suspectFailures: m.suspect?.failures ?? 0,
          cooldownMs,
        }),
      ).metadata;
    }

    it("stamps the suspect run with the database's clock, not the caller's: a worker whose clock runs a year ahead cannot lengthen it", async () => {
      const id = await exporting("suspect-clock");
      const yearAhead = later(NOW, 365 * 24 * HOUR);
      const before = Date.now();
      await fail(id, LOAD_COUNTED, yearAhead);
      const m = (await store.getBucket(id))!;
      expect(m.failedAt).toEqual(yearAhead);
      expect(m.suspect).toMatchObject({ kind: "load", failures: 1 });
      expect(Math.abs(m.suspect!.since.getTime() - before)).toBeLessThan(60_000);
      const evidence = (await store.quarantineEvidence(id))!;
      expect(evidence).toMatchObject({ attempts: 1, retries: 0 });
      expect(evidence.runForMs).toBeLessThan(60_000);
    });

    it("an outage leaves the suspect run alone; a takeover and an uncounted ambiguous failure extend it, only counted ones add attempts", async () => {
      const id = await exporting("suspect-kinds");
      await fail(id, OUTAGE_FAILURE);
      expect(await store.getBucket(id)).toMatchObject({
        suspect: null,
        attempts: 0,
        outageDeferrals: 1,
      });

      await acquire(store, id);
      await acquire(store, id, later(NOW, LEASE_MS + 1));
      const taken = (await store.getBucket(id))!;
      expect(taken).toMatchObject({ attempts: 1, suspect: { kind: "takeover", failures: 1 } });
      committed(
        await store.defer(
          {
            bucket: id,
            token: taken.ownerToken!,
            generation: taken.generation,
            expiresAt: taken.leaseExpiresAt!,
          },
          NOW,
          NOW,
          "timeout",
          LOAD_ALONE,
        ),
      );
      const m = (await store.getBucket(id))!;
      expect(m).toMatchObject({
        attempts: 1,
        outageDeferrals: 2,
        suspect: { kind: "load", failures: 2, since: taken.suspect!.since },
      });
    });

    it("the run's kind is its latest failure's: a takeover after own failures makes it a takeover run, its count and start kept", async () => {
      const id = await exporting("suspect-latest-kind", bytes(9));
      await fail(id, OWN_FAILURE);
      const since = (await store.getBucket(id))!.suspect!.since;
      await fail(id, LOAD_COUNTED);
      await acquire(store, id);
      const taker = await acquire(store, id, later(NOW, LEASE_MS + 1));
      expect(await store.getBucket(id)).toMatchObject({
        attempts: 3,
        suspect: { kind: "takeover", failures: 3, since },
      });
      await store.releaseLease(taker);
    });

    it("progress ends the run: a recorded part resets attempts, the suspect run and the quarantine's retries; a publish too", async () => {
      const id = await exporting("suspect-progress");
      await fail(id, LOAD_COUNTED);
      await fail(id, OWN_FAILURE);
      expect(await store.getBucket(id)).toMatchObject({ attempts: 2, suspect: { failures: 2 } });
      const lease = await acquire(store, id);
      const part = {
        key: "p/part-0.json",
        sha256: "b".repeat(64),
        rowCount: 3,
        byteLength: 10,
        index: 0,
        first: null,
        last: null,
      };
      expect((await store.recordPart(lease, NOW, part)).kind).toBe("recorded");
      expect(await store.getBucket(id)).toMatchObject({
        attempts: 0,
        failedAt: null,
        suspect: null,
        quarantineRetries: 0,
      });
      await store.releaseLease(lease);
    });

    it("lifts a self-retrying quarantine only once its cool-down passed on the database's clock, whatever `now` the caller passes; the lift keeps the run and counts the retry, and a held quarantine is never lifted", async () => {
      const cooling = await exporting("lift-cooling", bytes(2));
      const soon = await exporting("lift-soon", bytes(3));
      const held = await exporting("lift-held", bytes(4));
      for (const id of [cooling, soon, held]) await fail(id, LOAD_COUNTED);
      await quarantined(cooling, HOUR);
      const soonQuarantined = await quarantined(soon, 1);
      expect(soonQuarantined.quarantineRetryAt).not.toBeNull();
      await quarantined(held, null);
      await sleep(20);

      const lifted = await store.liftCooledQuarantines(later(NOW, 10 * 365 * 24 * HOUR), 10);
      expect(lifted.map((m) => m.id.partitionKey[0])).toEqual([3]);
      expect(lifted[0]).toMatchObject({
        quarantinedAt: null,
        quarantineRetryAt: null,
        quarantineRetries: 1,
        attempts: 0,
        retryAt: null,
        enqueuedAt: null,
        suspect: { failures: 0, since: soonQuarantined.suspect!.since },
      });
      expect((await store.getBucket(cooling))!.quarantinedAt).not.toBeNull();
      expect((await store.getBucket(held))!.quarantinedAt).not.toBeNull();
      expect(await store.liftCooledQuarantines(NOW, 10)).toEqual([]);
    });

    it("an operator's release and the cool-down's lift leave a fresh start in either order", async () => {
      const liftFirst = await exporting("race-lift-first", bytes(5));
      const releaseFirst = await exporting("race-release-first", bytes(6));
      for (const id of [liftFirst, releaseFirst]) {
        await fail(id, LOAD_COUNTED);
        await quarantined(id, 1);
      }
      await sleep(20);
      const fresh = {
        quarantinedAt: null,
        quarantineRetryAt: null,
        quarantineRetries: 0,
        attempts: 0,
        outageDeferrals: 0,
        suspect: null,
      };
      expect(await store.releaseQuarantine(releaseFirst, NOW)).toMatchObject(fresh);
      const lifted = await store.liftCooledQuarantines(NOW, 10);
      expect(lifted.map((m) => m.id.partitionKey[0])).toEqual([5]);
      // Lifted (no longer quarantined, its run going on), then released: still a fresh start.
      expect(await store.releaseQuarantine(liftFirst, NOW)).toMatchObject(fresh);
      const listed = await store.releaseQuarantines({ tableId: liftFirst.tableId }, NOW, {
        dryRun: true,
      });
      expect(listed).toEqual([]);
    });

    it("a quarantine decided on counters an operator reset since is refused, and the lease stays the caller's", async () => {
      const id = await exporting("race-probation", bytes(7));
      await fail(id, LOAD_COUNTED);
      await quarantined(id, 1);
      await sleep(20);
      expect((await store.liftCooledQuarantines(NOW, 10)).length).toBe(1);
      await fail(id, LOAD_COUNTED);
      const worker = await acquire(store, id);
      const read = (await store.quarantineEvidence(id))!;
      expect(read).toMatchObject({ attempts: 1, retries: 1, run: { failures: 1 } });
      // Lifted but not through its run: `pulpitum retry --table` finds and releases it.
      const released = await store.releaseQuarantines({ tableId: id.tableId }, NOW, {
        dryRun: false,
      });
      expect(released.map((m) => m.quarantineRetries)).toEqual([0]);
      const refused = await store.quarantine(worker, NOW, "too late", {
        attempts: read.attempts,
        suspectFailures: read.run!.failures,
        cooldownMs: HOUR,
      });
      expect(refused.kind).toBe("lease-lost");
      expect(refused.metadata).toMatchObject({
        ownerToken: worker.token,
        generation: worker.generation,
        quarantinedAt: null,
        attempts: 0,
      });
      await store.releaseLease(worker);
    });

    it("evidence: other buckets archived since the run began, and others failing alike in the same family only (load-shaped and takeovers; unclassified)", async () => {
      const tableId = await newTable(store, "evidence");
      const ids = await Promise.all(
        ["a", "own", "taken", "unknown", "published"].map(async (label) => {
          const id = await hotBucket(store, tableId, text(`evidence-${label}`));
          await advanceTo(store, id, "export");
          return id;
        }),
      );
      const [a, own, taken, unknown, published] = ids as [
        BucketId,
        BucketId,
        BucketId,
        BucketId,
        BucketId,
      ];
      await fail(a, LOAD_ALONE);
      const alone = (await store.quarantineEvidence(a))!;
      expect(alone).toMatchObject({ othersArchived: false, othersFailingAlike: false });

      await fail(own, OWN_FAILURE);
      await fail(unknown, UNKNOWN_ALONE);
      expect((await store.quarantineEvidence(a))!.othersFailingAlike).toBe(false);
      expect((await store.quarantineEvidence(unknown))!.othersFailingAlike).toBe(false);

      await acquire(store, taken);
      await acquire(store, taken, later(NOW, LEASE_MS + 1));
      expect((await store.quarantineEvidence(a))!.othersFailingAlike).toBe(true);
      // Since its own run began, nobody failed alike; once `a` fails again, somebody has.
      expect((await store.quarantineEvidence(taken))!.othersFailingAlike).toBe(false);
      await fail(a, LOAD_ALONE);
      expect((await store.quarantineEvidence(taken))!.othersFailingAlike).toBe(true);
      // An own failure is never the fleet's.
      expect((await store.quarantineEvidence(own))!.othersFailingAlike).toBe(false);

      expect((await store.quarantineEvidence(a))!.othersArchived).toBe(false);
      const lease = await acquire(store, published, later(NOW, 2 * LEASE_MS));
      await store.releaseLease(lease);
      await advanceTo(store, published, "cleanup");
      expect((await store.quarantineEvidence(a))!.othersArchived).toBe(true);
    });
  });
}
