/**
 * Dropping a table: refused while anything is in flight; otherwise the
 * registration, every bucket's metadata and hot rows go, an interrupted or
 * contended drop is finished by running it again, and the archive objects
 * stay until garbage collection removes them as unowned.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { TableRecord } from "../../../src/domain/record.js";
import { parseTableId } from "../../../src/domain/table.js";
import { parseRfc3339Micros } from "../../../src/domain/time.js";
import { UnknownTableError } from "../../../src/errors.js";
import type { SqlHotStore } from "../../../src/adapters/sql/sql-hot-store.js";
import type { ArchiverContext } from "../../../src/usecases/context.js";
import { dropTable, TableInFlightError } from "../../../src/usecases/drop-table.js";
import { collectGarbage } from "../../../src/usecases/gc.js";
import { silentLog } from "../../../src/usecases/context.js";
import {
  chatRecords,
  converge,
  makeHarness,
  seedTable,
  type Harness,
} from "../../support/workflow-harness.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const table = parseTableId("chat");
const other = parseTableId("other");

/** Records of March 2026: after the harness cutoff, so their buckets stay hot. */
function hotRecords(count: number): TableRecord[] {
  return Array.from({ length: count }, (_, i) => ({
    partitionKey: new TextEncoder().encode(`c-${i % 2}`),
    eventTime: parseRfc3339Micros("2026-03-01T00:00:00Z") + BigInt(i),
    sortKey: new TextEncoder().encode(`hot-${i}`),
    value: new TextEncoder().encode(`hot value ${i}`),
  }));
}

describe("dropping a table", () => {
  let h: Harness;
  let ctx: ArchiverContext;
  beforeEach(async () => {
    h = await makeHarness({ cleanupBatchSize: 7 });
    const archived = await seedTable(h, table, "CalendarMonthUtc", "json", chatRecords([1, 2], 12));
    await converge(h, archived);
    await h.inner.append(table, hotRecords(30), h.clock.now());
    const kept = await seedTable(h, other, "CalendarMonthUtc", "json", chatRecords([1], 5));
    await converge(h, kept);
    ctx = h.process().ctx;
  });
  afterEach(async () => h.close());

  const objectKeys = async (prefix: string) =>
    (await h.objects.list(prefix, { maxKeys: 1000 })).objects.map((o) => o.key);

  it("removes the registration, every bucket and its hot rows, keeps other tables, and leaves the archive objects", async () => {
    const before = await objectKeys("archive/v4/chat/");
    expect(before.length).toBe(8);
    const report = await dropTable(ctx, table);
    expect(report).toEqual({
      table_id: "chat",
      resumed: false,
      buckets_removed: 6,
      archived_buckets_removed: 4,
      hot_rows_deleted: 30,
      busy: [],
      dropped: true,
    });
    expect(await h.inner.getTable(table)).toBeNull();
    expect(await h.inner.listArchiveReferences(table, null, 100, h.clock.now())).toEqual([]);
    for (const c of ["c-0", "c-1"]) {
      const id = {
        tableId: table,
        partitionKey: new TextEncoder().encode(c),
        bucketKey: "month:2026-03",
      };
      expect(await h.inner.countHotRows(id)).toBe(0);
    }
    await expect(h.inner.append(table, hotRecords(1), h.clock.now())).rejects.toBeInstanceOf(
      UnknownTableError,
    );
    expect(await objectKeys("archive/v4/chat/")).toEqual(before);
    expect((await h.inner.listArchiveReferences(other, null, 100, h.clock.now())).length).toBe(2);

    // The objects are unowned now: gc keeps them by default and removes them when asked.
    const gc = (includeUnowned: boolean) =>
      collectGarbage(
        {
          hotStore: h.inner,
          objectStore: h.objects,
          clock: { now: () => new Date(Date.now() + 7_200_000) },
          archivePrefix: "archive",
          log: silentLog,
        },
        { minAgeMs: 3_600_000, dryRun: false, includeUnowned, leaseMs: 60_000 },
      );
    expect((await gc(false)).kept.unowned).toBe(8);
    expect((await gc(true)).deleted_objects).toBe(8);
    expect(await objectKeys("archive/v4/chat/")).toEqual([]);
    expect((await objectKeys("archive/v4/other/")).length).toBe(4);
  });

  it("refuses while a bucket is in flight, naming it and the reason, and changes nothing", async () => {
    const id = {
      tableId: table,
      partitionKey: new TextEncoder().encode("c-0"),
      bucketKey: "month:2026-03",
    };
    const lease = await h.inner.acquireLease(id, h.clock.now(), 60_000);
    expect(lease.kind).toBe("acquired");
    const refusal = await dropTable(ctx, table).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(TableInFlightError);
    expect((refusal as Error).message).toMatch(
      /table chat cannot be dropped while buckets are in flight: chat\/c-0\/month:2026-03 \(claim leased until 2026-06-01T\d\d:\d\d:\d\d\.000Z\)\. Nothing was changed/,
    );
    expect(await h.inner.getTable(table)).not.toBeNull();
    expect(await h.inner.countHotRows(id)).toBe(15);
  });

  it("finishes a drop interrupted after its first bucket when run again; the table stays registered and paused meanwhile", async () => {
    const crashing = h.process({
      hot: { operation: "dropBucketBatch", when: "before", kind: "crash", nth: 3 },
    }).ctx;
    await expect(dropTable(crashing, table)).rejects.toThrow("simulated crash");
    expect((await h.inner.getTable(table))?.paused).toBe(true);
    expect(
      (await h.inner.listArchiveReferences(table, null, 100, h.clock.now())).length,
    ).toBeGreaterThan(0);
    expect(
      await h.inner
        .peekCandidates({
          now: h.clock.now(),
          ...fixedCutoffs(new Date("2027-01-01T00:00:00Z")),
          limit: 100,
          enqueuedBefore: h.clock.now(),
        })
        .then((c) => c.filter((x) => x.id.tableId === table)),
    ).toEqual([]);

    h.clock.advance(61_000);
    const report = await dropTable(ctx, table);
    expect(report).toMatchObject({ resumed: false, dropped: true });
    expect(await h.inner.listArchiveReferences(table, null, 100, h.clock.now())).toEqual([]);
    await expect(dropTable(ctx, table)).rejects.toBeInstanceOf(UnknownTableError);
  });

  it("leaves a bucket a worker leased during the drop, reports it, keeps the table registered, and finishes on the next run", async () => {
    const raced = {
      tableId: table,
      partitionKey: new TextEncoder().encode("c-1"),
      bucketKey: "month:2026-03",
    };
    const racing = h.process({
      hot: {
        operation: "beginTableDrop",
        when: "after",
        kind: "hook",
        // A worker with an old queue message takes the lease right after the check.
        hook: async () => {
          expect((await h.inner.acquireLease(raced, h.clock.now(), 60_000)).kind).toBe("acquired");
        },
      },
    }).ctx;
    const first = await dropTable(racing, table);
    expect(first).toMatchObject({
      busy: ["chat/c-1/month:2026-03"],
      buckets_removed: 5,
      dropped: false,
    });
    expect(await h.inner.countHotRows(raced)).toBe(15);
    expect((await h.inner.getTable(table))?.paused).toBe(true);

    h.clock.advance(61_000);
    const second = await dropTable(ctx, table);
    expect(second).toMatchObject({
      buckets_removed: 1,
      hot_rows_deleted: 15,
      busy: [],
      dropped: true,
    });
  });

  it("removes buckets left without a registration (an append that landed after an earlier drop) and says it resumed", async () => {
    await (h.inner as SqlHotStore).db.query("DELETE FROM pulpitum_v4_tables WHERE table_id = $1", [
      table,
    ]);
    const report = await dropTable(ctx, table);
    expect(report).toMatchObject({ resumed: true, buckets_removed: 6, dropped: true });
    expect(await h.inner.listArchiveReferences(table, null, 100, h.clock.now())).toEqual([]);
  });
});
