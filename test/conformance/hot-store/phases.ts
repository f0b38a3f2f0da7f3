/**
 * Hot store conformance: the fenced phases, snapshot pages and cleanup.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { compareClustering } from "../../../src/domain/record.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import type { BucketRow, HotStore } from "../../../src/ports/hot-store.js";
import { OUTAGE_FAILURE, OWN_FAILURE } from "../../../src/ports/failure-runs.js";
import {
  acquire,
  advanceTo,
  bytes,
  committed,
  CUTOFF,
  hotBucket,
  LEASE_MS,
  later,
  newTable,
  NOW,
  PAYLOAD,
  readSnapshot,
  rec,
  recordOnePart,
} from "./support.js";
import { rowAt } from "../../../src/ports/row-page.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

export function phaseConformance(opened: () => HotStore): void {
  describe("phases", () => {
    let store: HotStore;

    beforeAll(() => {
      store = opened();
    });

    it("claims a hot bucket closed before the cutoff into archiving/export and releases the lease", async () => {
      const tableId = await newTable(store, "claim");
      const id = await hotBucket(store, tableId);
      const recent = { tableId, partitionKey: bytes(1), bucketKey: "year:2025" };
      await store.append(tableId, [rec("2025-02-01T00:00:00Z", "a", "1")], NOW);

      const early = await store.claim(await acquire(store, recent), NOW, fixedCutoffs(CUTOFF));
      expect(early.kind).toBe("lease-lost");
      expect(early.metadata).toMatchObject({ state: "hot" });

      const claimed = committed(
        await store.claim(await acquire(store, id), NOW, fixedCutoffs(CUTOFF)),
      );
      expect(claimed.metadata).toMatchObject({
        state: "archiving",
        phase: "export",
        ownerToken: null,
        leaseExpiresAt: null,
        attempts: 0,
        outageDeferrals: 0,
        retryAt: null,
        lastError: null,
        generation: 1,
      });
      const again = await store.claim(await acquire(store, id), NOW, fixedCutoffs(CUTOFF));
      expect(again.kind).toBe("lease-lost");
    });

    it("pages the snapshot in (event_time, sort_key) order with byte-wise sort keys across several pages", async () => {
      const tableId = await newTable(store, "order");
      const sortKeys = [
        bytes(),
        bytes(0),
        bytes(0x6b),
        bytes(0x6b, 0),
        bytes(0x6b, 0xff),
        bytes(0x6c),
        bytes(0x7f),
        bytes(0x80),
        bytes(0xff),
        bytes(0xff, 0xff),
      ];
      const times = [
        "2023-01-01T00:00:00.000001Z",
        "2023-01-01T00:00:00Z",
        "2023-12-31T23:59:59.999999Z",
      ];
      const records = times.flatMap((t) => sortKeys.map((k, i) => rec(t, k, `v${i}`)));
      const shuffled = [...records].sort(() => Math.random() - 0.5);
      await store.append(tableId, shuffled, NOW);
      const id = { tableId, partitionKey: bytes(1), bucketKey: "year:2023" };
      committed(await store.claim(await acquire(store, id), NOW, fixedCutoffs(CUTOFF)));

      const { rows, pages } = await readSnapshot(store, await acquire(store, id), NOW, 4);

      const expected = [...records].sort(compareClustering);
      expect(pages).toBe(Math.ceil(expected.length / 4) + (expected.length % 4 === 0 ? 1 : 0));
      expect(rows.map((r) => [r.eventTime, Buffer.from(r.sortKey).toString("hex")])).toEqual(
        expected.map((r) => [r.eventTime, Buffer.from(r.sortKey).toString("hex")]),
      );
      expect(rows.map((r) => Buffer.from(r.value).toString())).toEqual(
        expected.map((r) => Buffer.from(r.value).toString()),
      );
      const k = rows.filter((r) => r.eventTime === parseRfc3339Micros(times[1]!));
      expect(k.slice(2, 5).map((r) => Buffer.from(r.sortKey).toString("hex"))).toEqual([
        "6b",
        "6b00",
        "6bff",
      ]);
    });

    it("returns an empty page past the last row, which is not a lost lease", async () => {
      const tableId = await newTable(store, "empty");
      const id = await hotBucket(store, tableId, bytes(1), 2);
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);

      const first = await store.snapshotPage(lease, NOW, null, 2);
      expect(first.kind === "page" && first.rows.count).toBe(2);
      const last = first.kind === "page" ? rowAt(first.rows, 1) : null;
      const after = await store.snapshotPage(lease, NOW, last, 2);
      expect(after.kind === "page" && after.rows.count).toBe(0);
      expect((await store.snapshotPage(lease, later(NOW, LEASE_MS), last, 2)).kind).toBe(
        "lease-lost",
      );
    });

    it("records payload, manifest and publication in phase order, each releasing the lease", async () => {
      const tableId = await newTable(store, "phases");
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "export");

      const early = await acquire(store, id);
      expect((await store.publish(early, NOW)).kind).toBe("lease-lost");
      expect((await store.recordManifest(early, NOW, "m")).kind).toBe("lease-lost");
      await store.releaseLease(early);

      const sealed = committed(await recordOnePart(store, await acquire(store, id), NOW, PAYLOAD));
      expect(sealed.metadata).toMatchObject({
        phase: "seal",
        exported: { parts: 1, rowCount: PAYLOAD.rowCount, byteLength: PAYLOAD.byteLength },
        ownerToken: null,
      });
      expect(await store.listParts(id)).toEqual([
        { ...PAYLOAD, index: 0, first: null, last: null },
      ]);
      const repeat = await acquire(store, id);
      expect((await recordOnePart(store, repeat, NOW, PAYLOAD)).kind).toBe("lease-lost");
      await store.releaseLease(repeat);

      const manifested = committed(
        await store.recordManifest(await acquire(store, id), NOW, "m/manifest.json"),
      );
      expect(manifested.metadata).toMatchObject({
        state: "archiving",
        phase: "publish",
        manifestKey: "m/manifest.json",
        ownerToken: null,
      });

      const published = committed(await store.publish(await acquire(store, id), NOW));
      expect(published.metadata).toMatchObject({
        state: "archived",
        phase: "cleanup",
        hotDeleted: false,
        manifestKey: "m/manifest.json",
        exported: { parts: 1, rowCount: PAYLOAD.rowCount, byteLength: PAYLOAD.byteLength },
        ownerToken: null,
        leaseExpiresAt: null,
      });
      expect((await store.snapshotPage(await acquire(store, id), NOW, null, 1)).kind).toBe(
        "lease-lost",
      );
    });

    it("cleans up 50,000 rows in batches, resumes after the lease expires mid-way, and only then finishes", async () => {
      const tableId = await newTable(store, "cleanup");
      const total = 50_000;
      const records = Array.from({ length: total }, (_, i) =>
        rec(
          `2023-04-01T00:00:${String(Math.floor(i / 10_000)).padStart(2, "0")}Z`,
          bytes(i >> 8, i & 0xff),
          bytes(i & 0xff),
        ),
      );
      for (let i = 0; i < total; i += 10_000) {
        await store.append(tableId, records.slice(i, i + 10_000), NOW);
      }
      const id = { tableId, partitionKey: bytes(1), bucketKey: "year:2023" };
      await advanceTo(store, id, "cleanup");

      let now = NOW;
      const first = await acquire(store, id, now);
      const counts: number[] = [];
      for (let i = 0; i < 4; i++) {
        const batch = await store.cleanupBatch(first, now, 5_000);
        expect(batch.kind).toBe("deleted");
        if (batch.kind === "deleted") counts.push(batch.count);
      }
      expect(await store.finishCleanup(first, now)).toEqual({ kind: "rows-remain" });

      now = later(now, LEASE_MS);
      expect((await store.cleanupBatch(first, now, 5_000)).kind).toBe("lease-lost");
      const second = await acquire(store, id, now);
      expect(second.generation).toBe(first.generation + 1);
      for (;;) {
        const batch = await store.cleanupBatch(second, now, 5_000);
        if (batch.kind !== "deleted") throw new Error("lease lost during cleanup");
        if (batch.count === 0) break;
        counts.push(batch.count);
      }

      expect(counts.every((c) => c <= 5_000)).toBe(true);
      expect(counts.reduce((a, b) => a + b, 0)).toBe(total);
      expect(counts).toHaveLength(total / 5_000);
      const done = await store.finishCleanup(second, now);
      expect(done).toMatchObject({
        kind: "committed",
        metadata: { state: "archived", phase: "done", hotDeleted: true, ownerToken: null },
      });
      expect((await store.finishCleanup(await acquire(store, id, now), now)).kind).toBe(
        "lease-lost",
      );
    }, 300_000);

    it("deletes each cleanup batch after the previous batch's last key, never touching rows before it", async () => {
      const tableId = await newTable(store, "keyset-cleanup");
      const id = await hotBucket(store, tableId, bytes(1), 25);
      const read = await store.readBucket(id, { limit: 100 });
      if (read.route !== "hot") throw new Error("expected a hot bucket");
      const keyOf = (row: BucketRow) => ({ eventTime: row.eventTime, sortKey: row.sortKey });
      await advanceTo(store, id, "cleanup");
      const lease = await acquire(store, id);

      // Starting after row 5 leaves rows 1 to 5 alone.
      const first = await store.cleanupBatch(lease, NOW, 10, keyOf(read.rows[4]!));
      expect(first).toEqual({ kind: "deleted", count: 10, last: keyOf(read.rows[14]!) });
      expect(await store.countHotRows(id)).toBe(15);
      const second = await store.cleanupBatch(lease, NOW, 10, keyOf(read.rows[14]!));
      expect(second).toEqual({ kind: "deleted", count: 10, last: keyOf(read.rows[24]!) });
      expect(await store.countHotRows(id)).toBe(5);
      const past = await store.cleanupBatch(lease, NOW, 10, keyOf(read.rows[24]!));
      expect(past).toEqual({ kind: "deleted", count: 0 });
      expect(await store.finishCleanup(lease, NOW)).toEqual({ kind: "rows-remain" });

      const rest = await store.cleanupBatch(lease, NOW, 10, null);
      expect(rest).toEqual({ kind: "deleted", count: 5 });
      expect((await store.finishCleanup(lease, NOW)).kind).toBe("committed");
    });

    it("defers an attempt back to hot with attempts + 1, the retry time and the truncated error, accepting appends again", async () => {
      const tableId = await newTable(store, "defer");
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "publish");
      const retryAt = later(NOW, 15_000);

      const deferred = committed(
        await store.defer(await acquire(store, id), NOW, retryAt, `e${"x".repeat(5_000)}`),
      );

      expect(deferred.metadata).toMatchObject({
        state: "hot",
        phase: "claim",
        attempts: 1,
        retryAt,
        exported: null,
        manifestKey: null,
        ownerToken: null,
        leaseExpiresAt: null,
      });
      expect(deferred.metadata.lastError).toHaveLength(2_000);
      expect(await store.append(tableId, [rec("2023-09-09T00:00:00Z", "late", "1")], NOW)).toEqual({
        inserted: 1,
        duplicates: 0,
      });
    });

    it("defers an outage without counting an attempt: outageDeferrals + 1, attempts unchanged, and publish resets both", async () => {
      const tableId = await newTable(store, "defer-outage");
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "export");
      committed(await store.defer(await acquire(store, id), NOW, NOW, "corrupt", OWN_FAILURE));
      for (let n = 1; n <= 3; n++) {
        await advanceTo(store, id, "export");
        const deferred = committed(
          await store.defer(await acquire(store, id), NOW, NOW, "S3 refused", OUTAGE_FAILURE),
        );
        expect(deferred.metadata).toMatchObject({
          state: "hot",
          attempts: 1,
          outageDeferrals: n,
          retryAt: NOW,
          lastError: "S3 refused",
        });
      }
      const published = await advanceTo(store, id, "cleanup");
      expect(published).toMatchObject({ state: "archived", attempts: 0, outageDeferrals: 0 });
    });

    it("counts failures in a row without progress: a committed export or seal starts the run over, a claim does not", async () => {
      const tableId = await newTable(store, "progress-resets");
      const id = await hotBucket(store, tableId);
      // A failed export goes back through claim: the claim is not progress, the count stands.
      await advanceTo(store, id, "export");
      committed(await store.defer(await acquire(store, id), NOW, NOW, "own", OWN_FAILURE));
      await advanceTo(store, id, "export");
      expect((await store.getBucket(id))!).toMatchObject({ phase: "export", attempts: 1 });
      // A takeover of a dead holder's lease counts; the export it then finishes resets the run.
      const holder = await acquire(store, id);
      const taker = await acquire(store, id, later(holder.expiresAt, 1));
      expect((await store.getBucket(id))!.attempts).toBe(2);
      committed(await recordOnePart(store, taker, later(holder.expiresAt, 1), PAYLOAD));
      expect((await store.getBucket(id))!).toMatchObject({
        phase: "seal",
        attempts: 0,
        failedAt: null,
      });
      // The same in seal: a takeover counts, the recorded manifest resets.
      const sealer = await acquire(store, id);
      const sealTaker = await acquire(store, id, later(sealer.expiresAt, 1));
      expect((await store.getBucket(id))!.attempts).toBe(1);
      committed(await store.recordManifest(sealTaker, later(sealer.expiresAt, 1), "m/x.json"));
      expect((await store.getBucket(id))!).toMatchObject({ phase: "publish", attempts: 0 });
    });

    it("refuses the claim itself while a retry is pending or the table is paused, whoever holds the lease", async () => {
      const tableId = await newTable(store, "claim-guard");
      const id = await hotBucket(store, tableId);
      const retryAt = later(NOW, 30_000);
      committed(await store.defer(await acquire(store, id), NOW, retryAt, "boom"));

      const early = await acquire(store, id);
      expect(await store.claim(early, NOW, fixedCutoffs(CUTOFF))).toMatchObject({
        kind: "lease-lost",
        metadata: { state: "hot", retryAt },
      });

      const due = later(NOW, LEASE_MS + 1);
      await store.setPaused(tableId, true, NOW);
      const paused = await acquire(store, id, due);
      expect(await store.claim(paused, due, fixedCutoffs(CUTOFF))).toMatchObject({
        kind: "lease-lost",
        metadata: { state: "hot" },
      });
      await store.setPaused(tableId, false, NOW);
      expect(await store.claim(paused, due, fixedCutoffs(CUTOFF))).toMatchObject({
        kind: "committed",
        metadata: { state: "archiving", retryAt: null },
      });
    });

    it("stamps dereferencedAt when a deferral clears a recorded payload, and not when there was none", async () => {
      const tableId = await newTable(store, "dereference");
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "export");
      const bare = committed(await store.defer(await acquire(store, id), NOW, NOW, "early"));
      expect(bare.metadata.dereferencedAt).toBeNull();

      await advanceTo(store, id, "seal");
      const dropped = later(NOW, 5_000);
      const cleared = committed(
        await store.defer(await acquire(store, id, dropped), dropped, dropped, "late"),
      );
      expect(cleared.metadata).toMatchObject({ exported: null, dereferencedAt: dropped });
    });

    it("refuses to defer an archived bucket", async () => {
      const tableId = await newTable(store, "defer-archived");
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "cleanup");

      const result = await store.defer(await acquire(store, id), NOW, NOW, "too late");

      expect(result).toMatchObject({ kind: "lease-lost", metadata: { state: "archived" } });
    });

    it("replaces an archived bucket's manifest key under a live lease and releases it, and refuses a stale lease, a bucket not archived or a key that changed", async () => {
      const tableId = await newTable(store, "repair");
      const id = await hotBucket(store, tableId);
      const hotLease = await acquire(store, id);
      const notArchived = await store.replaceManifest(hotLease, NOW, "m/manifest.json", "m/x.json");
      expect(notArchived).toMatchObject({ kind: "lease-lost", metadata: { state: "hot" } });
      await store.releaseLease(hotLease);
      const old = (await advanceTo(store, id, "cleanup")).manifestKey!;

      const stale = await acquire(store, id);
      const at = later(NOW, LEASE_MS + 2);
      const lease = await acquire(store, id, later(NOW, LEASE_MS + 1));
      const refused = await store.replaceManifest(stale, at, old, "m/new.json");
      expect(refused).toMatchObject({ kind: "lease-lost", metadata: { manifestKey: old } });
      const wrongKey = await store.replaceManifest(lease, at, "m/other.json", "m/new.json");
      expect(wrongKey).toMatchObject({ kind: "lease-lost", metadata: { manifestKey: old } });

      const replaced = committed(await store.replaceManifest(lease, at, old, "m/new.json"));
      expect(replaced.metadata).toMatchObject({
        state: "archived",
        manifestKey: "m/new.json",
        ownerToken: null,
        leaseExpiresAt: null,
        generation: lease.generation,
      });
      expect(await store.listParts(id)).toHaveLength(1);

      // Finished, so discovery has nothing of it to offer the tests after this one.
      const cleaning = await acquire(store, id, later(at, 1));
      expect((await store.cleanupBatch(cleaning, later(at, 1), 100)).kind).toBe("deleted");
      committed(await store.finishCleanup(cleaning, later(at, 1)));
    });
  });
}
