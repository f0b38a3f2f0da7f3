/**
 * Scrub × cleanup: a published bucket whose archive a scrub found corrupt
 * keeps its hot rows, which may be the last good copy. Cleanup refuses the
 * bucket, and a mark that lands while cleanup runs stops it at its next
 * delete batch.
 */
import { describe, expect, it } from "vitest";
import { scrubStoreOf } from "../../../src/adapters/sql/scrub-store.js";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseTableId } from "../../../src/domain/table.js";
import type { ArchiverContext } from "../../../src/usecases/context.js";
import { runNextPhase } from "../../../src/usecases/run-next-phase.js";
import {
  chatRecords,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const ROWS = 300;

async function published(): Promise<{ h: Harness; id: BucketId; ctx: ArchiverContext }> {
  const h = await makeHarness({ cleanupBatchSize: 50 });
  const expected = await seedTable(
    h,
    TABLE,
    "CalendarMonthUtc",
    "json",
    chatRecords([3], ROWS, ["solo"]),
  );
  const { id } = [...expected.values()][0]!;
  const ctx = h.process().ctx;
  for (const phase of ["claim", "export", "seal", "publish"])
    expect(await runNextPhase(ctx, id)).toMatchObject({ phase, result: "advanced" });
  return { h, id, ctx };
}

async function markCorrupt(h: Harness, id: BucketId): Promise<void> {
  const m = (await h.inner.getBucket(id))!;
  const marked = await scrubStoreOf(h.inner)!.markCorrupt(
    { id, generation: m.generation, manifestKey: m.manifestKey!, marksSeen: m.corruptMarks },
    h.clock.now(),
    "archive object … failed verification (injected)",
  );
  expect(marked).toBe(true);
}

describe("cleanup of a bucket found corrupt", () => {
  it("refuses to delete any hot row and says why", async () => {
    const { h, id, ctx } = await published();
    await markCorrupt(h, id);
    const outcome = await runNextPhase(ctx, id);
    expect(outcome).toMatchObject({ phase: "cleanup", result: "deferred" });
    expect(outcome.reason).toMatch(/was found corrupt .* its hot rows are kept/);
    expect(await h.inner.countHotRows(id)).toBe(ROWS);
    const after = (await h.inner.getBucket(id))!;
    expect(after).toMatchObject({ state: "archived", hotDeleted: false });
    await h.close();
  });

  it("stops at the next delete batch when the mark lands while it runs", async () => {
    const { h, id, ctx } = await published();
    let batches = 0;
    const racing: ArchiverContext = {
      ...ctx,
      hotStore: {
        ...ctx.hotStore,
        cleanupBatch: async (lease, now, limit, after) => {
          const result = await ctx.hotStore.cleanupBatch(lease, now, limit, after);
          if (++batches === 1) await markCorrupt(h, id);
          return result;
        },
      },
    };
    const outcome = await runNextPhase(racing, id);
    expect(outcome.result).not.toBe("advanced");
    expect(batches).toBe(2);
    expect(await h.inner.countHotRows(id)).toBe(ROWS - 50);
    expect((await h.inner.getBucket(id))?.hotDeleted).toBe(false);
    await h.close();
  });
});
