/**
 * Hot store conformance: the table registry.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { TableStrategyConflictError, UnknownTableError } from "../../../src/errors.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import { acquire, CUTOFF, hotBucket, newTable, NOW, rec, uniqueTableId } from "./support.js";
import { fixedCutoffs } from "../../support/cutoffs.js";

export function registryConformance(opened: () => HotStore): void {
  describe("table registry", () => {
    let store: HotStore;

    beforeAll(() => {
      store = opened();
    });

    it("registers a table, confirms an identical registration, and updates format or writable window", async () => {
      const tableId = uniqueTableId("reg");
      const base = { tableId, strategy: "CalendarMonthUtc" as const, format: "json" as const };

      expect(await store.registerTable({ ...base, writableBuckets: null }, NOW)).toBe("created");
      expect(await store.registerTable({ ...base, writableBuckets: null }, NOW)).toBe("unchanged");
      expect(
        await store.registerTable({ ...base, format: "parquet", writableBuckets: 3 }, NOW),
      ).toBe("updated");

      expect(await store.getTable(tableId)).toEqual({
        tableId,
        strategy: "CalendarMonthUtc",
        format: "parquet",
        writableBuckets: 3,
        paused: false,
        dropping: false,
        archiveAfter: null,
        expireAfter: null,
        storageClass: null,
        // Registered (1), then format and writable buckets changed in one update (2).
        policyVersion: 2,
        policyChangedAt: NOW,
      });
      expect((await store.listTables()).map((t) => t.tableId)).toContain(tableId);
    });

    it("refuses to change a table's bucket strategy with a message that names the fix", async () => {
      const tableId = await newTable(store, "strategy", { strategy: "CalendarYearUtc" });

      const attempt = store.registerTable(
        { tableId, strategy: "CalendarDayUtc", format: "json", writableBuckets: null },
        NOW,
      );

      await expect(attempt).rejects.toBeInstanceOf(TableStrategyConflictError);
      await expect(attempt).rejects.toThrow(/register a new table id/);
      expect((await store.getTable(tableId))?.strategy).toBe("CalendarYearUtc");
    });

    it("reads a bucket with its table in one, exactly as getBucket and getTable read them, paused or leased, whatever its partition key; null for a bucket never written", async () => {
      const tableId = await newTable(store, "with_table");
      // A long partition key of every byte value, zero bytes and 0xff included.
      const odd = new Uint8Array(700).map((_, i) => (i * 37) % 256);
      const id = await hotBucket(store, tableId, odd, 4);
      const expectSame = async () => {
        const read = await store.getBucketWithTable(id);
        expect(read).toEqual({
          metadata: await store.getBucket(id),
          table: await store.getTable(tableId),
        });
        return read!;
      };

      expect((await expectSame()).table?.paused).toBe(false);
      await acquire(store, id);
      expect((await expectSame()).metadata.ownerToken).not.toBeNull();
      await store.setPaused(tableId, true, NOW);
      expect((await expectSame()).table?.paused).toBe(true);
      expect(
        await store.getBucketWithTable({ tableId, partitionKey: odd, bucketKey: "year:2022" }),
      ).toBeNull();
    });

    it("records pause and resume, and pausing an unknown table throws UnknownTableError", async () => {
      const tableId = await newTable(store, "pause");

      expect((await store.setPaused(tableId, true, NOW)).paused).toBe(true);
      expect((await store.getTable(tableId))?.paused).toBe(true);
      expect((await store.setPaused(tableId, false, NOW)).paused).toBe(false);

      await expect(store.setPaused(uniqueTableId("absent"), true, NOW)).rejects.toBeInstanceOf(
        UnknownTableError,
      );
      expect(await store.getTable(uniqueTableId("absent"))).toBeNull();
    });

    it("status's oldest eligible bucket is one discovery would offer: not quarantined, not paused, not leased", async () => {
      const old = (label: string, year: number) =>
        newTable(store, label).then(async (tableId) => {
          await store.append(tableId, [rec(`${year}-03-01T00:00:00Z`, "k", "v")], NOW);
          return tableId;
        });
      const paused = await old("status-paused", 1970);
      await store.setPaused(paused, true, NOW);
      const quarantined = await old("status-quarantined", 1971);
      const [q] = await store.listPartitionBuckets(quarantined, new Uint8Array([1]), {});
      const lease = await acquire(store, q!.id);
      expect((await store.quarantine(lease, NOW, "injected")).kind).toBe("committed");
      const leased = await old("status-leased", 1972);
      const [l] = await store.listPartitionBuckets(leased, new Uint8Array([1]), {});
      await acquire(store, l!.id);
      const eligible = await old("status-eligible", 1973);

      const report = await store.statusReport(NOW, fixedCutoffs(CUTOFF));
      expect(report.oldestEligibleHot?.id.tableId).toBe(eligible);
    });
  });
}
