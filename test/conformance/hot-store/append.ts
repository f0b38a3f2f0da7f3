/**
 * Hot store conformance: appends, the append fence and the ingestion guard.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { fixedCutoffs } from "../../support/cutoffs.js";
import { MAX_APPEND_RECORDS, MAX_VALUE_BYTES } from "../../../src/domain/limits.js";
import {
  BucketNotWritableError,
  InvalidInputError,
  RecordConflictError,
  UnknownTableError,
} from "../../../src/errors.js";
import type { HotStore } from "../../../src/ports/hot-store.js";
import {
  acquire,
  advanceTo,
  at,
  bytes,
  committed,
  CUTOFF,
  hotBucket,
  newTable,
  NOW,
  readSnapshot,
  rec,
  uniqueTableId,
} from "./support.js";

export function appendConformance(opened: () => HotStore): void {
  describe("append", () => {
    let store: HotStore;

    beforeAll(() => {
      store = opened();
    });

    it("creates hot bucket metadata with the strategy and bounds on the first append", async () => {
      const tableId = await newTable(store, "meta", { strategy: "CalendarMonthUtc" });

      const result = await store.append(
        tableId,
        [rec("2024-02-29T23:59:59.999999Z", "a", "1", bytes(0, 255))],
        NOW,
      );

      expect(result).toEqual({ inserted: 1, duplicates: 0 });
      const metadata = await store.getBucket({
        tableId,
        partitionKey: bytes(0, 255),
        bucketKey: "month:2024-02",
      });
      expect(metadata).toMatchObject({
        strategy: "CalendarMonthUtc",
        start: at("2024-02-01T00:00:00Z"),
        end: at("2024-03-01T00:00:00Z"),
        state: "hot",
        phase: "claim",
        generation: 0,
        ownerToken: null,
        attempts: 0,
        exported: null,
        manifestKey: null,
        hotDeleted: false,
        enqueuedAt: null,
        createdAt: NOW,
      });
      expect(metadata?.id.partitionKey).toEqual(bytes(0, 255));
    });

    it("treats a repeated append as idempotent: identical records count as duplicates", async () => {
      const tableId = await newTable(store, "dup");
      const records = [
        rec("2023-01-01T00:00:00Z", "a", "1"),
        rec("2023-01-01T00:00:00Z", "b", "2"),
      ];

      expect(await store.append(tableId, records, NOW)).toEqual({ inserted: 2, duplicates: 0 });
      expect(await store.append(tableId, records, NOW)).toEqual({ inserted: 0, duplicates: 2 });
      expect(await store.append(tableId, [...records, records[0]!], NOW)).toEqual({
        inserted: 0,
        duplicates: 3,
      });
      expect(await store.append(tableId, [], NOW)).toEqual({ inserted: 0, duplicates: 0 });
    });

    it("rejects a different value under an existing identity with RecordConflictError and writes nothing", async () => {
      const tableId = await newTable(store, "conflict");
      await store.append(tableId, [rec("2023-01-01T00:00:00Z", "a", "1")], NOW);

      await expect(
        store.append(
          tableId,
          [rec("2023-01-02T00:00:00Z", "new", "x"), rec("2023-01-01T00:00:00Z", "a", "2")],
          NOW,
        ),
      ).rejects.toBeInstanceOf(RecordConflictError);
      await expect(
        store.append(
          tableId,
          [rec("2023-05-01T00:00:00Z", "z", "1"), rec("2023-05-01T00:00:00Z", "z", "2")],
          NOW,
        ),
      ).rejects.toBeInstanceOf(RecordConflictError);
      // A batch in clustering order too (the SQL store then skips its identity map).
      await expect(
        store.append(
          tableId,
          [rec("2023-01-01T00:00:00Z", "a", "2"), rec("2023-01-03T00:00:00Z", "new", "x")],
          NOW,
        ),
      ).rejects.toBeInstanceOf(RecordConflictError);

      const id = { tableId, partitionKey: bytes(1), bucketKey: "year:2023" };
      const lease = await acquire(store, id);
      committed(await store.claim(lease, NOW, fixedCutoffs(CUTOFF)));
      const { rows } = await readSnapshot(store, await acquire(store, id), NOW, 10);
      expect(rows.map((r) => Buffer.from(r.value).toString())).toEqual(["1"]);
    });

    it("throws UnknownTableError when appending to an unregistered table", async () => {
      await expect(
        store.append(uniqueTableId("nope"), [rec("2023-01-01T00:00:00Z", "a", "1")], NOW),
      ).rejects.toBeInstanceOf(UnknownTableError);
    });

    it("rejects appends to an archiving or archived bucket with BucketNotWritableError", async () => {
      const tableId = await newTable(store, "fenced");
      const archiving = await hotBucket(store, tableId, bytes(1));
      const archived = await hotBucket(store, tableId, bytes(2));
      await advanceTo(store, archiving, "export");
      await advanceTo(store, archived, "cleanup");

      for (const pk of [bytes(1), bytes(2)]) {
        const attempt = store.append(tableId, [rec("2023-07-01T00:00:00Z", "late", "x", pk)], NOW);
        await expect(attempt).rejects.toBeInstanceOf(BucketNotWritableError);
        await expect(attempt).rejects.toThrow(/year:2023/);
      }
      expect((await store.getBucket(archived))?.state).toBe("archived");
    });

    it("accepts the current bucket and the writable_buckets - 1 before it, rejecting older ones and naming the window", async () => {
      const tableId = await newTable(store, "window", {
        strategy: "CalendarMonthUtc",
        writableBuckets: 2,
      });
      const now = at("2025-06-15T12:00:00Z");

      expect(
        await store.append(
          tableId,
          [rec("2025-06-01T00:00:00Z", "a", "1"), rec("2025-05-01T00:00:00Z", "a", "1")],
          now,
        ),
      ).toEqual({ inserted: 2, duplicates: 0 });

      const attempt = store.append(tableId, [rec("2025-04-30T23:59:59.999999Z", "a", "1")], now);
      await expect(attempt).rejects.toBeInstanceOf(BucketNotWritableError);
      await expect(attempt).rejects.toThrow(/month:2025-05.*writable_buckets = 2/);
      expect(
        await store.getBucket({ tableId, partitionKey: bytes(1), bucketKey: "month:2025-04" }),
      ).toBeNull();
    });

    it("accepts the bucket after the current one (a writer's clock slightly ahead) and refuses any later: a timestamp in 2262 is not data to keep hot", async () => {
      const tableId = await newTable(store, "future", {
        strategy: "CalendarMonthUtc",
        writableBuckets: 2,
      });
      const now = at("2025-06-15T12:00:00Z");
      expect(await store.append(tableId, [rec("2025-07-31T23:59:59Z", "a", "1")], now)).toEqual({
        inserted: 1,
        duplicates: 0,
      });
      for (const time of ["2025-08-01T00:00:00Z", "2262-04-11T23:47:16Z"]) {
        const attempt = store.append(tableId, [rec(time, "a", "1")], now);
        await expect(attempt).rejects.toBeInstanceOf(BucketNotWritableError);
        await expect(attempt).rejects.toThrow(
          /accepts buckets month:2025-05 through month:2025-07/,
        );
      }
    });

    it("rejects a whole batch when one record's bucket is not writable: nothing is half-written", async () => {
      const tableId = await newTable(store, "atomic");
      const fenced = await hotBucket(store, tableId, bytes(9));
      await advanceTo(store, fenced, "export");
      await store.append(tableId, [rec("2022-01-01T00:00:00Z", "a", "1", bytes(3))], NOW);

      const attempt = store.append(
        tableId,
        [
          rec("2022-02-01T00:00:00Z", "b", "1", bytes(3)),
          rec("2021-01-01T00:00:00Z", "c", "1", bytes(4)),
          rec("2023-02-01T00:00:00Z", "d", "1", bytes(9)),
        ],
        NOW,
      );

      await expect(attempt).rejects.toBeInstanceOf(BucketNotWritableError);
      expect(
        await store.getBucket({ tableId, partitionKey: bytes(4), bucketKey: "year:2021" }),
      ).toBeNull();
      const hot = { tableId, partitionKey: bytes(3), bucketKey: "year:2022" };
      committed(await store.claim(await acquire(store, hot), NOW, fixedCutoffs(CUTOFF)));
      const { rows } = await readSnapshot(store, await acquire(store, hot), NOW, 10);
      expect(rows.map((r) => Buffer.from(r.sortKey).toString())).toEqual(["a"]);
    });

    it("refuses an oversized value or an append of too many records with a typed error, storing nothing", async () => {
      const tableId = await newTable(store, "append-limits");
      const big = rec("2023-02-02T00:00:00Z", "big", new Uint8Array(MAX_VALUE_BYTES + 1));
      const fine = rec("2023-02-02T00:00:01Z", "fine", "ok");
      await expect(store.append(tableId, [fine, big], NOW)).rejects.toThrow(
        new RegExp(
          `its value is ${MAX_VALUE_BYTES + 1} bytes long.*at most ${MAX_VALUE_BYTES} bytes`,
        ),
      );
      const many = Array.from({ length: MAX_APPEND_RECORDS + 1 }, (_, i) =>
        rec("2023-02-03T00:00:00Z", `k${i}`, "v"),
      );
      await expect(store.append(tableId, many, NOW)).rejects.toThrow(
        new RegExp(`at most ${MAX_APPEND_RECORDS} records per append`),
      );
      await expect(store.append(tableId, many, NOW)).rejects.toBeInstanceOf(InvalidInputError);
      expect(
        await store.getBucket({ tableId, partitionKey: bytes(1), bucketKey: "year:2023" }),
      ).toBeNull();
    });

    it("stores a batch larger than one statement in one transaction", async () => {
      const tableId = await newTable(store, "large");
      const records = Array.from({ length: 2_345 }, (_, i) =>
        rec("2023-08-01T00:00:00Z", `k${String(i).padStart(5, "0")}`, `v${i}`),
      );

      expect(await store.append(tableId, records, NOW)).toEqual({
        inserted: 2_345,
        duplicates: 0,
      });
      expect(await store.append(tableId, records.slice(1_000, 2_100), NOW)).toEqual({
        inserted: 0,
        duplicates: 1_100,
      });
      const id = { tableId, partitionKey: bytes(1), bucketKey: "year:2023" };
      committed(await store.claim(await acquire(store, id), NOW, fixedCutoffs(CUTOFF)));
      const { rows } = await readSnapshot(store, await acquire(store, id), NOW, 1_000);
      expect(rows).toHaveLength(2_345);
    });
  });
}
