/**
 * Hot store conformance: a table's versioned policy (archive_after,
 * expire_after, storage class, beside format, ingestion guard and pause),
 * and eligibility by each table's own window in discovery, the claim,
 * `plan` and `status`. Discovery sees every table, so these tests read it
 * without stamping (peekCandidates) and look only at their own tables.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { BucketId } from "../../../src/domain/bucket.js";
import { parseDuration } from "../../../src/domain/duration.js";
import type { TableId } from "../../../src/domain/table.js";
import { InvalidInputError, UnknownTableError } from "../../../src/errors.js";
import type { DiscoveryQuery, HotStore, TableWindow } from "../../../src/ports/hot-store.js";
import { acquire, at, committed, later, newTable, NOW, rec, uniqueTableId } from "./support.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

const d = (text: string) => parseDuration(text);

export function policyConformance(opened: () => HotStore): void {
  describe("table policies", () => {
    let store: HotStore;

    beforeAll(() => {
      store = opened();
    });

    /** A day-bucketed table with one record on each of `days`, and a window. */
    async function tableWithDays(
      label: string,
      days: readonly string[],
      archiveAfter: string | null,
    ): Promise<TableId> {
      const tableId = await newTable(store, label, { strategy: "CalendarDayUtc" });
      if (archiveAfter !== null) {
        await store.alterTable(tableId, { archiveAfter: d(archiveAfter) }, NOW);
      }
      await store.append(
        tableId,
        days.map((day) => rec(`${day}T12:00:00Z`, "k", "v")),
        NOW,
      );
      return tableId;
    }

    const dayId = (tableId: TableId, day: string): BucketId => ({
      tableId,
      partitionKey: new Uint8Array([1]),
      bucketKey: `day:${day}`,
    });

    async function windowOf(tableId: TableId, archiveCutoff: Date): Promise<TableWindow> {
      const table = await store.getTable(tableId);
      return { tableId, policyVersion: table!.policyVersion, archiveCutoff };
    }

    async function offered(
      tables: readonly TableId[],
      query: Partial<DiscoveryQuery>,
    ): Promise<string[]> {
      const candidates = await store.peekCandidates({
        now: NOW,
        ...fixedCutoffs(at("2024-01-01T00:00:00Z")),
        limit: 10_000,
        enqueuedBefore: NOW,
        ...query,
      });
      return candidates
        .filter((c) => tables.includes(c.id.tableId))
        .map((c) => `${c.kind}:${c.id.tableId.split("-")[0]}:${c.id.bucketKey}`)
        .sort();
    }

    it("keeps every policy change as a new version in the history; an alter that changes nothing writes nothing", async () => {
      const tableId = uniqueTableId("policy");
      const registered = await store.registerTable(
        {
          tableId,
          strategy: "CalendarDayUtc",
          format: "json",
          writableBuckets: null,
          archiveAfter: d("90d"),
          expireAfter: d("7y"),
          storageClass: "STANDARD_IA",
        },
        NOW,
      );
      expect(registered).toBe("created");
      const t1 = later(NOW, 1000);
      const altered = await store.alterTable(tableId, { archiveAfter: d("P30D") }, t1);
      expect(altered.changed).toEqual(["archive_after"]);
      expect(altered.table).toMatchObject({
        archiveAfter: d("30d"),
        expireAfter: d("P7Y"),
        storageClass: "STANDARD_IA",
        policyVersion: 2,
        policyChangedAt: t1,
      });
      const same = await store.alterTable(tableId, { archiveAfter: d("30d") }, later(NOW, 2000));
      expect(same.changed).toEqual([]);
      expect(same.table.policyVersion).toBe(2);
      await store.setPaused(tableId, true, later(NOW, 3000));
      await store.setPaused(tableId, true, later(NOW, 4000));

      const history = await store.policyHistory(tableId);
      expect(history.map((v) => [v.version, v.changed, v.changedAt.getTime()])).toEqual([
        [1, ["registered"], NOW.getTime()],
        [2, ["archive_after"], t1.getTime()],
        [3, ["paused"], later(NOW, 3000).getTime()],
      ]);
      expect(history[0]).toMatchObject({
        archiveAfter: d("90d"),
        expireAfter: d("7y"),
        storageClass: "STANDARD_IA",
        paused: false,
      });
      expect(history[2]).toMatchObject({ archiveAfter: d("30d"), paused: true });
      expect((await store.getTable(tableId))?.policyVersion).toBe(3);
    });

    it("unsets a field given as null, and leaves fields the change does not name as they were", async () => {
      const tableId = await newTable(store, "unset");
      await store.alterTable(
        tableId,
        { archiveAfter: d("2y"), expireAfter: d("10y"), storageClass: "GLACIER_IR" },
        NOW,
      );
      const { table, changed } = await store.alterTable(
        tableId,
        { expireAfter: null, storageClass: null },
        NOW,
      );
      expect(changed.slice().sort()).toEqual(["expire_after", "storage_class"]);
      expect(table).toMatchObject({
        archiveAfter: d("2y"),
        expireAfter: null,
        storageClass: null,
        policyVersion: 3,
      });
    });

    it("refuses a lifecycle that makes no sense with an error naming what is accepted, and changes nothing", async () => {
      const tableId = await newTable(store, "refuse", {
        strategy: "CalendarMonthUtc",
        writableBuckets: 3,
      });
      const refused = async (change: Parameters<HotStore["alterTable"]>[1], message: RegExp) => {
        const attempt = store.alterTable(tableId, change, NOW);
        await expect(attempt).rejects.toBeInstanceOf(InvalidInputError);
        await expect(attempt).rejects.toThrow(message);
      };
      await refused({ expireAfter: d("7y") }, /without archive_after.*--archive-after 90d/);
      await refused(
        { archiveAfter: d("1y"), expireAfter: d("365d") },
        /not longer than archive_after P1Y.*expire_after longer than archive_after/,
      );
      // Three writable months accept appends up to two months after a bucket ends.
      await refused({ archiveAfter: d("30d") }, /shorter than the ingestion guard/);
      const table = await store.getTable(tableId);
      expect(table).toMatchObject({ archiveAfter: null, expireAfter: null, policyVersion: 1 });
      expect(await store.policyHistory(tableId)).toHaveLength(1);
      await expect(store.alterTable(uniqueTableId("absent"), {}, NOW)).rejects.toBeInstanceOf(
        UnknownTableError,
      );
    });

    it("offers each table's hot buckets up to its own window, and the global cutoff to a table without one", async () => {
      const days = ["2022-06-01", "2024-12-01", "2025-02-01", "2025-05-01"];
      const short = await tableWithDays("short", days, "90d");
      const long = await tableWithDays("long", days, "2y");
      const none = await tableWithDays("none", days, null);
      const windows = [
        await windowOf(short, at("2025-03-03T00:00:00Z")),
        await windowOf(long, at("2023-06-01T00:00:00Z")),
      ];

      expect(await offered([short, long, none], { windows })).toEqual([
        "eligible:long:day:2022-06-01",
        "eligible:none:day:2022-06-01",
        "eligible:short:day:2022-06-01",
        "eligible:short:day:2024-12-01",
        "eligible:short:day:2025-02-01",
      ]);
      // Held buckets and status judge by the same windows: nothing of these tables is held.
      const held = await store.listHeldBuckets({
        now: NOW,
        ...fixedCutoffs(at("2024-01-01T00:00:00Z")),
        windows,
        limit: 10_000,
      });
      expect(held.filter((h) => [short, long, none].includes(h.id.tableId))).toEqual([]);
      // Without the windows, a table with one is skipped: its window was not computed.
      expect(await offered([short, long, none], {})).toEqual(["eligible:none:day:2022-06-01"]);
    });

    it("skips a table whose policy changed after its window was computed, until the next scan computes it anew", async () => {
      const table = await tableWithDays("stale", ["2024-12-01", "2025-05-01"], "90d");
      const stale = await windowOf(table, at("2025-03-03T00:00:00Z"));
      await store.alterTable(table, { archiveAfter: d("1y") }, NOW);

      expect(await offered([table], { windows: [stale] })).toEqual([]);
      const fresh = await windowOf(table, at("2024-06-01T00:00:00Z"));
      expect(await offered([table], { windows: [fresh] })).toEqual([]);
      const shortened = await store.alterTable(table, { archiveAfter: d("7d") }, NOW);
      expect(
        await offered([table], {
          windows: [
            {
              tableId: table,
              policyVersion: shortened.table.policyVersion,
              archiveCutoff: at("2025-05-25T00:00:00Z"),
            },
          ],
        }),
      ).toEqual(["eligible:stale:day:2024-12-01", "eligible:stale:day:2025-05-01"]);
    });

    it("claims only under the policy version its cutoff came from: a window changed in between leaves the bucket hot", async () => {
      const table = await tableWithDays("claim", ["2025-02-01"], "90d");
      const id = dayId(table, "2025-02-01");
      const version = (await store.getTable(table))!.policyVersion;
      const cutoff = at("2025-03-03T00:00:00Z");
      await store.alterTable(table, { archiveAfter: d("1y") }, NOW);

      const lease = await acquire(store, id);
      const refused = await store.claim(lease, NOW, {
        ...fixedCutoffs(cutoff),
        policyVersion: version,
      });
      expect(refused.kind).toBe("lease-lost");
      expect((await store.getBucket(id))?.state).toBe("hot");

      const current = (await store.getTable(table))!.policyVersion;
      const again = await acquire(store, id, later(NOW, 120_000));
      expect(
        (
          await store.claim(again, later(NOW, 120_000), {
            ...fixedCutoffs(at("2024-06-01T00:00:00Z")),
            policyVersion: current,
          })
        ).kind,
      ).toBe("lease-lost");
      const third = await acquire(store, id, later(NOW, 240_000));
      const claimed = committed(
        await store.claim(third, later(NOW, 240_000), {
          ...fixedCutoffs(cutoff),
          policyVersion: current,
        }),
      );
      expect(claimed.metadata.state).toBe("archiving");
    });

    it("a bucket claimed before its window was lengthened keeps archiving: it is offered as stalled, not returned to hot", async () => {
      const table = await tableWithDays("inflight", ["2025-02-01"], "90d");
      const id = dayId(table, "2025-02-01");
      const version = (await store.getTable(table))!.policyVersion;
      const lease = await acquire(store, id);
      committed(
        await store.claim(lease, NOW, {
          ...fixedCutoffs(at("2025-03-03T00:00:00Z")),
          policyVersion: version,
        }),
      );
      await store.alterTable(table, { archiveAfter: d("2y") }, NOW);

      const afterLease = later(NOW, 10 * 60_000);
      expect(
        await offered([table], {
          now: afterLease,
          enqueuedBefore: afterLease,
          windows: [await windowOf(table, at("2023-06-01T00:00:00Z"))],
        }),
      ).toEqual(["stalled:inflight:day:2025-02-01"]);
      expect((await store.getBucket(id))?.state).toBe("archiving");
    });

    it("forgets a dropped table's policy history: registering the id again starts at version 1", async () => {
      const tableId = await newTable(store, "dropped");
      await store.alterTable(tableId, { archiveAfter: d("30d") }, NOW);
      await store.setPaused(tableId, true, NOW);
      await store.beginTableDrop(tableId, NOW);
      expect(await store.finishTableDrop(tableId)).toBe("dropped");
      expect(await store.policyHistory(tableId)).toEqual([]);

      await store.registerTable(
        { tableId, strategy: "CalendarYearUtc", format: "json", writableBuckets: null },
        NOW,
      );
      expect((await store.policyHistory(tableId)).map((v) => v.version)).toEqual([1]);
    });
  });
}
