/**
 * Restore from the archive: fenced like archival, resumable after a crash,
 * and never showing a reader a mix of tiers or a partial copy.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InProcessWorkQueue } from "../../../src/adapters/queue/in-process.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import { ArchiveIntegrityError } from "../../../src/errors.js";
import { discover } from "../../../src/usecases/discover.js";
import { restoreBucket, type RestoreReport } from "../../../src/usecases/restore.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import { SimulatedCrash } from "../../support/faults.js";
import {
  archivedRecords,
  chatRecords,
  converge,
  expectFullyArchived,
  expectSameRecords,
  makeHarness,
  readBucketAsReader,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { onlyPart } from "../../support/one-part.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const TABLE = parseTableId("chat");
const HOLD_MS = 3_600_000;

async function hotRecords(h: Harness, id: BucketId): Promise<TableRecord[]> {
  const read = await h.inner.readBucket(id, { limit: 1_000_000 });
  expect(read.route).toBe("hot");
  return read.route === "hot"
    ? read.rows.map((row) => ({ partitionKey: id.partitionKey, ...row }))
    : [];
}

describe("restoring an archived bucket", () => {
  let h: Harness;
  let id: BucketId;
  let records: TableRecord[];

  beforeEach(async () => {
    h = await makeHarness();
    const expected = await seedTable(
      h,
      TABLE,
      "CalendarMonthUtc",
      "parquet",
      chatRecords([3], 230, ["solo"]),
    );
    await converge(h, expected);
    await expectFullyArchived(h, expected);
    ({ id, records } = [...expected.values()][0]!);
  });
  afterEach(async () => {
    await h.close();
  });

  it("copies every archived record back exactly once and routes reads to the hot store", async () => {
    const archived = await h.inner.getBucket(id);
    const report = await restoreBucket(h.process().ctx, id, { holdMs: HOLD_MS, batchRows: 50 });

    expect(report).toMatchObject({
      result: "restored",
      resumed: false,
      rows_inserted: records.length,
      rows_verified: 0,
      manifest_key: archived!.manifestKey,
    });
    expectSameRecords(await hotRecords(h, id), records);
    expect(await h.inner.countHotRows(id)).toBe(records.length);
    const after = await h.inner.getBucket(id);
    expect(after).toMatchObject({
      state: "hot",
      phase: "claim",
      exported: null,
      manifestKey: null,
      hotDeleted: false,
      restoreStartedAt: null,
      ownerToken: null,
      attempts: 0,
    });
    expect(after!.retryAt?.getTime()).toBe(h.clock.now().getTime() + HOLD_MS);
  });

  it("a restore is the operator's fresh start: restoring a quarantined bucket releases it, so once the hold passes it is archived again without a retry", async () => {
    // Prepare: the archived bucket set aside under a worker's lease, as quarantine leaves it
    const acquired = await h.inner.acquireLease(id, h.clock.now(), h.settings.leaseMs);
    if (acquired.kind !== "acquired") throw new Error("no lease");
    await h.inner.quarantine(acquired.lease, h.clock.now(), "quarantined after 5 failed attempts");
    expect((await h.inner.getBucket(id))!.quarantinedAt).not.toBeNull();

    // Act
    const report = await restoreBucket(h.process().ctx, id, { holdMs: HOLD_MS });

    // Assess
    expect(report).toMatchObject({ result: "restored", rows_inserted: records.length });
    expect(await h.inner.getBucket(id)).toMatchObject({
      state: "hot",
      quarantinedAt: null,
      attempts: 0,
      lastError: null,
    });
    expect(
      (await h.inner.statusReport(h.clock.now(), fixedCutoffs(h.clock.now()))).quarantined,
    ).toEqual([]);
    h.clock.advance(HOLD_MS + 1);
    const expected = new Map([["solo", { id, records }]]);
    await converge(h, expected);
    await expectFullyArchived(h, expected);
  });

  it("closes each restore transaction at its byte bound as well as its row bound", async () => {
    const { ctx } = h.process();
    const batches: number[] = [];
    const counting = {
      ...ctx,
      hotStore: Object.assign(Object.create(ctx.hotStore) as typeof ctx.hotStore, {
        restoreRecords: (...args: Parameters<typeof ctx.hotStore.restoreRecords>) => {
          batches.push(args[2].reduce((n, r) => n + r.sortKey.byteLength + r.value.byteLength, 0));
          return ctx.hotStore.restoreRecords(...args);
        },
      }),
    };
    const rowBytes = records[0]!.sortKey.byteLength + records[0]!.value.byteLength;
    const batchBytes = 20 * rowBytes;

    const report = await restoreBucket(counting, id, { holdMs: HOLD_MS, batchBytes });

    expect(report).toMatchObject({ result: "restored", rows_inserted: records.length });
    expect(batches.length).toBeGreaterThanOrEqual(Math.ceil(records.length / 21));
    expect(Math.max(...batches)).toBeLessThan(batchBytes + 2 * rowBytes);
    expectSameRecords(await hotRecords(h, id), records);
  });

  it("keeps a restored bucket out of discovery until its hold passes, then archives it again: same bytes, a new attempt's key", async () => {
    const before = await onlyPart(h.inner, id);
    await restoreBucket(h.process().ctx, id, { holdMs: HOLD_MS });
    const queue = new InProcessWorkQueue();
    const { ctx } = h.process();
    const settings = h.settings;
    expect(await discover({ hotStore: ctx.hotStore, queue, settings }, h.clock.now())).toEqual([]);

    h.clock.advance(HOLD_MS + 1);
    await converge(h, new Map([["solo", { id, records }]]));
    await expectFullyArchived(h, new Map([["solo", { id, records }]]));
    const again = await onlyPart(h.inner, id);
    expect(again.sha256).toBe(before.sha256);
    expect(again.key).not.toBe(before.key);
  });

  it("serves every read during the restore from the archive and the first read after the flip from a complete hot store", async () => {
    const seen: Array<{ route: string; count: number }> = [];
    const observe = async () => {
      const read = await h.inner.readBucket(id, { limit: 1_000_000 });
      expectSameRecords(await readBucketAsReader(h, id), records);
      seen.push({ route: read.route, count: read.route === "hot" ? read.rows.length : -1 });
    };
    const { ctx } = h.process({
      hot: [
        { operation: "restoreRecords", when: "after", kind: "hook", nth: 1, hook: observe },
        { operation: "restoreRecords", when: "after", kind: "hook", nth: 3, hook: observe },
        { operation: "finishRestore", when: "before", kind: "hook", hook: observe },
        { operation: "finishRestore", when: "after", kind: "hook", hook: observe },
      ],
    });
    const report = await restoreBucket(ctx, id, { holdMs: HOLD_MS, batchRows: 50 });
    expect(report.result).toBe("restored");
    expect(seen).toEqual([
      { route: "archive", count: -1 },
      { route: "archive", count: -1 },
      { route: "archive", count: -1 },
      { route: "hot", count: records.length },
    ]);
  });

  it("a crash mid-restore leaves reads on the archive and cleanup fenced off, and once the lease expires discovery offers it and a worker finishes it, every row once, with the hold the operator asked for", async () => {
    const { ctx: doomed } = h.process({
      hot: { operation: "restoreRecords", when: "after", kind: "crash", nth: 2 },
    });
    await expect(
      restoreBucket(doomed, id, { holdMs: HOLD_MS, batchRows: 50 }),
    ).rejects.toBeInstanceOf(SimulatedCrash);

    const marked = await h.inner.getBucket(id);
    expect(marked).toMatchObject({ state: "archived", hotDeleted: true });
    expect(marked!.restoreStartedAt).not.toBeNull();
    expect(await h.inner.countHotRows(id)).toBe(100);
    expectSameRecords(await readBucketAsReader(h, id), records);
    expect(await h.inner.append(TABLE, [records[0]!], h.clock.now()).catch((e) => e)).toMatchObject(
      {
        name: "BucketNotWritableError",
      },
    );

    // The dead restorer's lease is still live: a second restorer is told to wait.
    const busy = await restoreBucket(h.process().ctx, id, { holdMs: HOLD_MS });
    expect(busy.result).toBe("busy");

    h.clock.advance(h.settings.leaseMs + 1);
    // The cut-off restore is offered to a worker, which finishes it (never cleans it up).
    const queue = new InProcessWorkQueue();
    const { ctx } = h.process();
    expect(
      await discover({ hotStore: ctx.hotStore, queue, settings: h.settings }, h.clock.now()),
    ).toMatchObject([{ kind: "restore", id }]);
    const finishedAt = h.clock.now();
    expect(await runNextPhase(ctx, id)).toMatchObject({
      phase: "restore",
      result: "advanced",
      next: null,
      rows: records.length - 100,
    });
    expectSameRecords(await hotRecords(h, id), records);
    const hot = await h.inner.getBucket(id);
    expect(hot).toMatchObject({ state: "hot", restoreStartedAt: null, restoreHoldMs: null });
    expect(hot!.retryAt).toEqual(new Date(finishedAt.getTime() + HOLD_MS));
    expect((await restoreBucket(h.process().ctx, id, { holdMs: HOLD_MS })).result).toBe(
      "already-hot",
    );
  });

  it("cleanup cannot delete the rows of a bucket whose restore began before its hot rows were cleaned", async () => {
    const fresh = await makeHarness();
    try {
      const expected = await seedTable(
        fresh,
        TABLE,
        "CalendarMonthUtc",
        "json",
        chatRecords([4], 120, ["solo"]),
      );
      const { id: bucket, records: rows } = [...expected.values()][0]!;
      const { ctx } = fresh.process();
      for (const phase of ["claim", "export", "seal", "publish"]) {
        expect(await runNextPhase(ctx, bucket)).toMatchObject({ phase, result: "advanced" });
      }
      expect(await fresh.inner.getBucket(bucket)).toMatchObject({
        state: "archived",
        hotDeleted: false,
      });
      // The restorer crashes right after marking the bucket.
      const { ctx: doomed } = fresh.process({
        hot: { operation: "restoreRecords", when: "before", kind: "crash" },
      });
      await expect(restoreBucket(doomed, bucket, { holdMs: HOLD_MS })).rejects.toBeInstanceOf(
        SimulatedCrash,
      );
      fresh.clock.advance(fresh.settings.leaseMs + 1);

      const lease = await fresh.inner.acquireLease(bucket, fresh.clock.now(), 60_000);
      expect(lease.kind).toBe("acquired");
      if (lease.kind !== "acquired") return;
      expect(await fresh.inner.cleanupBatch(lease.lease, fresh.clock.now(), 1000)).toMatchObject({
        kind: "lease-lost",
      });
      expect(await fresh.inner.finishCleanup(lease.lease, fresh.clock.now())).toMatchObject({
        kind: "lease-lost",
      });
      await fresh.inner.releaseLease(lease.lease);
      expect(await fresh.inner.countHotRows(bucket)).toBe(rows.length);

      // The worker's phase for it is the restore's finish, never cleanup.
      expect(await runNextPhase(ctx, bucket)).toMatchObject({
        phase: "restore",
        result: "advanced",
        rows: 0,
      });
      const read = await fresh.inner.readBucket(bucket, { limit: 10_000 });
      expect(read.route).toBe("hot");
      expectSameRecords(
        read.route === "hot"
          ? read.rows.map((r) => ({ partitionKey: bucket.partitionKey, ...r }))
          : [],
        rows,
      );
    } finally {
      await fresh.close();
    }
  });

  it("a stale restorer whose lease was taken over inserts nothing more and reports the lost lease", async () => {
    let rival: RestoreReport | undefined;
    const { ctx: stale } = h.process({
      hot: {
        operation: "restoreRecords",
        when: "before",
        kind: "hook",
        nth: 2,
        hook: async () => {
          h.clock.advance(h.settings.leaseMs + 1);
          rival = await restoreBucket(h.process().ctx, id, { holdMs: HOLD_MS, batchRows: 50 });
        },
      },
    });
    const report = await restoreBucket(stale, id, { holdMs: HOLD_MS, batchRows: 50 });
    expect(rival).toMatchObject({ result: "restored", resumed: true });
    expect(report.result).toBe("lease-lost");
    expectSameRecords(await hotRecords(h, id), records);
    expect(await h.inner.getBucket(id)).toMatchObject({ state: "hot", ownerToken: null });
  });

  it("a lost reply to the route flip is resolved by re-reading, and the restore counts as done", async () => {
    const { ctx } = h.process({
      hot: { operation: "finishRestore", when: "after", kind: "ambiguous" },
    });
    const report = await restoreBucket(ctx, id, { holdMs: HOLD_MS });
    expect(report.result).toBe("restored");
    expectSameRecords(await hotRecords(h, id), records);
  });

  it("a corrupt payload is refused before anything changes: no rows, no mark, reads stay on the archive", async () => {
    const before = await h.inner.getBucket(id);
    const payloadKey = (await onlyPart(h.inner, id)).key;
    const original = await h.objects.get(payloadKey);
    const corrupt = new Uint8Array(original);
    corrupt[Math.floor(corrupt.length / 2)]! ^= 0xff;
    h.objects.tamper(payloadKey, corrupt);

    await expect(restoreBucket(h.process().ctx, id, { holdMs: HOLD_MS })).rejects.toBeInstanceOf(
      ArchiveIntegrityError,
    );
    expect(await h.inner.getBucket(id)).toEqual({
      ...before,
      generation: before!.generation + 1,
      updatedAt: expect.any(Date),
    });
    expect(await h.inner.countHotRows(id)).toBe(0);
    h.objects.tamper(payloadKey, original);
    expectSameRecords(await archivedRecords(h, id), records);
  });

  it("restoring a bucket that is already hot changes nothing and says so", async () => {
    await restoreBucket(h.process().ctx, id, { holdMs: HOLD_MS });
    const before = await h.inner.getBucket(id);
    const again = await restoreBucket(h.process().ctx, id, { holdMs: HOLD_MS });
    expect(again.result).toBe("already-hot");
    expect(await h.inner.getBucket(id)).toEqual(before);
  });
});
