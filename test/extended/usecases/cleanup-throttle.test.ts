/**
 * Throttled cleanup: every delete is bounded by ARCHIVER_CLEANUP_BATCH_SIZE,
 * and with ARCHIVER_CLEANUP_MAX_ROWS_PER_SECOND the phase never deletes
 * faster than the cap. The clock is the harness's manual clock and the sleep
 * moves it, so the assertions are about requested waits, not wall time.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { ArchiverContext, ArchiverSettings } from "../../../src/usecases/context.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import {
  chatRecords,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const ROWS = 300;

interface Observed {
  readonly waits: number[];
  readonly batches: Array<{
    limit: number;
    count: number;
    startedAt: number;
    deletedBefore: number;
  }>;
}

/** A published bucket of ROWS rows, and a context whose cleanup calls and sleeps are recorded. */
async function publishedBucket(
  settings: Partial<ArchiverSettings>,
  statementMs = 0,
): Promise<{ h: Harness; id: BucketId; ctx: ArchiverContext; observed: Observed }> {
  const h = await makeHarness(settings);
  const expected = await seedTable(
    h,
    TABLE,
    "CalendarMonthUtc",
    "json",
    chatRecords([3], ROWS, ["solo"]),
  );
  const { id } = [...expected.values()][0]!;
  const base = h.process().ctx;
  for (const phase of ["claim", "export", "seal", "publish"]) {
    expect(await runNextPhase(base, id)).toMatchObject({ phase, result: "advanced" });
  }
  const observed: Observed = { waits: [], batches: [] };
  let deleted = 0;
  const ctx: ArchiverContext = {
    ...base,
    hotStore: {
      ...base.hotStore,
      cleanupBatch: async (lease, now, limit, after) => {
        const startedAt = h.clock.now().getTime();
        const result = await base.hotStore.cleanupBatch(lease, now, limit, after);
        h.clock.advance(statementMs);
        const count = result.kind === "deleted" ? result.count : -1;
        observed.batches.push({ limit, count, startedAt, deletedBefore: deleted });
        deleted += Math.max(0, count);
        return result;
      },
    },
    sleep: async (ms) => {
      observed.waits.push(ms);
      h.clock.advance(ms);
    },
  };
  return { h, id, ctx, observed };
}

describe("throttled cleanup", () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it("bounds every delete statement by the batch size and still deletes every hot row", async () => {
    const world = await publishedBucket({ cleanupBatchSize: 40, cleanupMaxRowsPerSecond: 0 });
    h = world.h;
    const outcome = await runNextPhase(world.ctx, world.id);
    expect(outcome).toMatchObject({ phase: "cleanup", result: "advanced", next: null, rows: ROWS });
    expect(world.observed.batches.map((b) => b.limit)).toEqual(Array(8).fill(40));
    expect(world.observed.batches.map((b) => b.count)).toEqual([40, 40, 40, 40, 40, 40, 40, 20]);
    expect(world.observed.waits).toEqual([]);
    expect(await h.inner.countHotRows(world.id)).toBe(0);
    expect(await h.inner.getBucket(world.id)).toMatchObject({ hotDeleted: true, phase: "done" });
  });

  it("never deletes faster than the per-second cap: each batch starts only once the rows before it fit under the cap", async () => {
    const world = await publishedBucket({ cleanupBatchSize: 40, cleanupMaxRowsPerSecond: 100 });
    h = world.h;
    await runNextPhase(world.ctx, world.id);
    const { batches, waits } = world.observed;
    const first = batches[0]!.startedAt;
    for (const b of batches) {
      // Rows deleted before this batch began, at 100 rows/s, needed at least this many ms.
      expect(b.startedAt - first).toBeGreaterThanOrEqual((b.deletedBefore / 100) * 1000);
    }
    // 40 rows per batch at 100 rows/s: 400 ms between batch starts, none after the last.
    expect(waits).toEqual(Array(7).fill(400));
    expect(await h.inner.countHotRows(world.id)).toBe(0);
  });

  it("counts the time the delete statements take against the cap instead of waiting on top of it", async () => {
    const world = await publishedBucket(
      { cleanupBatchSize: 40, cleanupMaxRowsPerSecond: 100 },
      300,
    );
    h = world.h;
    await runNextPhase(world.ctx, world.id);
    expect(world.observed.waits).toEqual(Array(7).fill(100));
    const { batches } = world.observed;
    for (const b of batches) {
      expect(b.startedAt - batches[0]!.startedAt).toBeGreaterThanOrEqual(b.deletedBefore * 10);
    }
  });

  it("does not wait at all when the statements alone are slower than the cap", async () => {
    const world = await publishedBucket(
      { cleanupBatchSize: 40, cleanupMaxRowsPerSecond: 100 },
      500,
    );
    h = world.h;
    await runNextPhase(world.ctx, world.id);
    expect(world.observed.waits).toEqual([]);
    expect(await h.inner.countHotRows(world.id)).toBe(0);
  });

  it("deletes one batch even when its invocation's deadline has already passed, so every message moves the bucket on", async () => {
    const world = await publishedBucket({ cleanupBatchSize: 40, cleanupMaxRowsPerSecond: 0 });
    h = world.h;

    const first = await runNextPhase(world.ctx, world.id, { deadline: h.clock.now() });
    const second = await runNextPhase(world.ctx, world.id, { deadline: h.clock.now() });

    expect(first).toMatchObject({
      phase: "cleanup",
      result: "advanced",
      next: "cleanup",
      rows: 40,
    });
    expect(second).toMatchObject({
      phase: "cleanup",
      result: "advanced",
      next: "cleanup",
      rows: 40,
    });
    expect(await h.inner.countHotRows(world.id)).toBe(ROWS - 80);
    expect(await runNextPhase(world.ctx, world.id)).toMatchObject({ next: null, rows: ROWS - 80 });
    expect(await h.inner.countHotRows(world.id)).toBe(0);
  });
});
