/**
 * The hot store contract, run against every adapter: PGlite in the unit
 * suite, real PostgreSQL in the integration suite. Each test states one
 * property of src/ports/hot-store.ts.
 *
 * Tests share one store per suite (opening PGlite takes seconds) and isolate
 * themselves with unique table ids. Discovery sees every table, so its tests
 * run on a store of their own and retire their buckets afterwards (see
 * {@link retireEverything}).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { SqlHotStore } from "../../src/adapters/sql/sql-hot-store.js";
import {
  parameterBytes,
  recordingOf,
  untypedPlaceholders,
  type RecordedStatement,
} from "../support/recording-database.js";
import { MIGRATIONS } from "../../src/adapters/sql/migrations.js";
import {
  MAX_APPEND_RECORDS,
  MAX_STATEMENT_BYTES,
  MAX_VALUE_BYTES,
} from "../../src/domain/limits.js";
import {
  AmbiguousCommitError,
  BucketNotWritableError,
  InvalidInputError,
  RecordConflictError,
  TableStrategyConflictError,
  UnknownTableError,
} from "../../src/errors.js";
import type { BucketId, BucketStrategy } from "../../src/domain/bucket.js";
import { compareClustering, type TableRecord } from "../../src/domain/record.js";
import { parseTableId, type TableId } from "../../src/domain/table.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import type {
  BucketMetadata,
  BucketRow,
  DiscoveryQuery,
  HotStore,
  Lease,
  PhaseName,
} from "../../src/ports/hot-store.js";

export interface OpenedHotStore<S extends HotStore = HotStore> {
  readonly store: S;
  /** Release the store and everything it holds. */
  cleanup(): Promise<void>;
}

const OPEN_TIMEOUT_MS = 120_000;
const LEASE_MS = 60_000;
const NOW = new Date("2025-06-01T00:00:00.000Z");
const CUTOFF = new Date("2025-01-01T00:00:00.000Z");
const at = (iso: string) => new Date(iso);
const later = (date: Date, ms: number) => new Date(date.getTime() + ms);
const bytes = (...values: number[]) => new Uint8Array(values);
const text = (s: string) => new TextEncoder().encode(s);

let tableCounter = 0;
function uniqueTableId(label: string): TableId {
  tableCounter += 1;
  return parseTableId(`${label}-${tableCounter}-${Math.random().toString(36).slice(2, 8)}`);
}

function rec(
  eventTime: string,
  sortKey: Uint8Array | string,
  value: Uint8Array | string,
  partitionKey: Uint8Array = bytes(1),
): TableRecord {
  return {
    partitionKey,
    eventTime: parseRfc3339Micros(eventTime),
    sortKey: typeof sortKey === "string" ? text(sortKey) : sortKey,
    value: typeof value === "string" ? text(value) : value,
  };
}

async function newTable(
  store: HotStore,
  label: string,
  options: { strategy?: BucketStrategy; writableBuckets?: number | null } = {},
): Promise<TableId> {
  const tableId = uniqueTableId(label);
  await store.registerTable(
    {
      tableId,
      strategy: options.strategy ?? "CalendarYearUtc",
      format: "json",
      writableBuckets: options.writableBuckets ?? null,
    },
    NOW,
  );
  return tableId;
}

/** A hot bucket of year 2023 (closed before CUTOFF) holding `records` records. */
async function hotBucket(
  store: HotStore,
  tableId: TableId,
  partitionKey: Uint8Array = bytes(1),
  records = 3,
): Promise<BucketId> {
  const rows = Array.from({ length: records }, (_, i) =>
    rec(
      `2023-03-01T00:00:0${i % 10}.${String(i).padStart(6, "0")}Z`,
      `k${i}`,
      `v${i}`,
      partitionKey,
    ),
  );
  await store.append(tableId, rows, NOW);
  return { tableId, partitionKey, bucketKey: "year:2023" };
}

async function acquire(
  store: HotStore,
  id: BucketId,
  now = NOW,
  leaseMs = LEASE_MS,
): Promise<Lease> {
  const result = await store.acquireLease(id, now, leaseMs);
  if (result.kind !== "acquired")
    throw new Error(`expected to acquire the lease, got ${result.kind}`);
  return result.lease;
}

function committed<T extends { kind: string }>(result: T): Extract<T, { kind: "committed" }> {
  if (result.kind !== "committed") throw new Error(`expected committed, got ${result.kind}`);
  return result as Extract<T, { kind: "committed" }>;
}

const PAYLOAD = { key: "p/payload.json", sha256: "a".repeat(64), rowCount: 3, byteLength: 123 };

/** Drive a hot bucket forward until its recorded phase is `target`. */
async function advanceTo(
  store: HotStore,
  id: BucketId,
  target: PhaseName,
): Promise<BucketMetadata> {
  const order: PhaseName[] = ["claim", "export", "seal", "publish", "cleanup"];
  let metadata = (await store.getBucket(id))!;
  while (order.indexOf(metadata.phase as PhaseName) < order.indexOf(target)) {
    const lease = await acquire(store, id);
    switch (metadata.phase) {
      case "claim":
        metadata = committed(await store.claim(lease, NOW, CUTOFF)).metadata;
        break;
      case "export":
        metadata = committed(await store.recordPayload(lease, NOW, PAYLOAD)).metadata;
        break;
      case "seal":
        metadata = committed(await store.recordManifest(lease, NOW, "m/manifest.json")).metadata;
        break;
      case "publish":
        metadata = committed(await store.publish(lease, NOW)).metadata;
        break;
      default:
        throw new Error(`cannot advance from ${metadata.phase}`);
    }
  }
  return metadata;
}

/** Every row of the fenced snapshot, page by page. */
async function readSnapshot(
  store: HotStore,
  lease: Lease,
  now: Date,
  pageSize: number,
): Promise<{ rows: BucketRow[]; pages: number }> {
  const rows: BucketRow[] = [];
  let pages = 0;
  for (;;) {
    const last = rows[rows.length - 1];
    const page = await store.snapshotPage(lease, now, last ?? null, pageSize);
    if (page.kind !== "page") throw new Error("lease lost while reading the snapshot");
    pages += 1;
    rows.push(...page.rows);
    if (page.rows.length < pageSize) return { rows, pages };
  }
}

const FAR_FUTURE = at("9000-01-01T00:00:00Z");

/**
 * Stamp every offerable bucket as enqueued in the far future, so later
 * discovery tests (whose `enqueuedBefore` is earlier) do not see it.
 */
async function retireEverything(store: HotStore): Promise<void> {
  await store.discover({
    now: FAR_FUTURE,
    cutoff: FAR_FUTURE,
    limit: 10_000,
    enqueuedBefore: FAR_FUTURE,
  });
}

export function hotStoreConformance(name: string, open: () => Promise<OpenedHotStore>): void {
  describe(`hot store conformance: ${name}`, () => {
    let store: HotStore;
    let cleanup: () => Promise<void>;

    beforeAll(async () => {
      ({ store, cleanup } = await open());
      await store.migrate();
    }, OPEN_TIMEOUT_MS);

    afterAll(async () => {
      await cleanup?.();
    });

    describe("table registry", () => {
      it("registers a table, confirms an identical registration, and updates format or writable window", async () => {
        const tableId = uniqueTableId("reg");
        const base = { tableId, strategy: "CalendarMonthUtc" as const, format: "json" as const };

        expect(await store.registerTable({ ...base, writableBuckets: null }, NOW)).toBe("created");
        expect(await store.registerTable({ ...base, writableBuckets: null }, NOW)).toBe(
          "unchanged",
        );
        expect(
          await store.registerTable({ ...base, format: "parquet", writableBuckets: 3 }, NOW),
        ).toBe("updated");

        expect(await store.getTable(tableId)).toEqual({
          tableId,
          strategy: "CalendarMonthUtc",
          format: "parquet",
          writableBuckets: 3,
          paused: false,
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
    });

    describe("append", () => {
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
          payload: null,
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

        const id = { tableId, partitionKey: bytes(1), bucketKey: "year:2023" };
        const lease = await acquire(store, id);
        committed(await store.claim(lease, NOW, CUTOFF));
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
          const attempt = store.append(
            tableId,
            [rec("2023-07-01T00:00:00Z", "late", "x", pk)],
            NOW,
          );
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
        committed(await store.claim(await acquire(store, hot), NOW, CUTOFF));
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
        committed(await store.claim(await acquire(store, id), NOW, CUTOFF));
        const { rows } = await readSnapshot(store, await acquire(store, id), NOW, 1_000);
        expect(rows).toHaveLength(2_345);
      });
    });

    describe("leases", () => {
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
        { op: "claim", phase: "claim", run: (s, l, n) => s.claim(l, n, CUTOFF) },
        { op: "snapshotPage", phase: "export", run: (s, l, n) => s.snapshotPage(l, n, null, 10) },
        { op: "recordPayload", phase: "export", run: (s, l, n) => s.recordPayload(l, n, PAYLOAD) },
        {
          op: "recordManifest",
          phase: "seal",
          run: (s, l, n) => s.recordManifest(l, n, "m/x.json"),
        },
        { op: "publish", phase: "publish", run: (s, l, n) => s.publish(l, n) },
        { op: "cleanupBatch", phase: "cleanup", run: (s, l, n) => s.cleanupBatch(l, n, 10) },
        { op: "finishCleanup", phase: "cleanup", run: (s, l, n) => s.finishCleanup(l, n) },
        { op: "defer", phase: "export", run: (s, l, n) => s.defer(l, n, n, "boom") },
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
            attempts: before.attempts,
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
    });

    describe("phases", () => {
      it("claims a hot bucket closed before the cutoff into archiving/export and releases the lease", async () => {
        const tableId = await newTable(store, "claim");
        const id = await hotBucket(store, tableId);
        const recent = { tableId, partitionKey: bytes(1), bucketKey: "year:2025" };
        await store.append(tableId, [rec("2025-02-01T00:00:00Z", "a", "1")], NOW);

        const early = await store.claim(await acquire(store, recent), NOW, CUTOFF);
        expect(early.kind).toBe("lease-lost");
        expect(early.metadata).toMatchObject({ state: "hot" });

        const claimed = committed(await store.claim(await acquire(store, id), NOW, CUTOFF));
        expect(claimed.metadata).toMatchObject({
          state: "archiving",
          phase: "export",
          ownerToken: null,
          leaseExpiresAt: null,
          attempts: 0,
          retryAt: null,
          lastError: null,
          generation: 1,
        });
        const again = await store.claim(await acquire(store, id), NOW, CUTOFF);
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
        committed(await store.claim(await acquire(store, id), NOW, CUTOFF));

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
        expect(first.kind === "page" && first.rows.length).toBe(2);
        const last = first.kind === "page" ? first.rows[1]! : null;
        expect(await store.snapshotPage(lease, NOW, last, 2)).toEqual({ kind: "page", rows: [] });
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

        const sealed = committed(await store.recordPayload(await acquire(store, id), NOW, PAYLOAD));
        expect(sealed.metadata).toMatchObject({
          phase: "seal",
          payload: PAYLOAD,
          ownerToken: null,
        });
        const repeat = await acquire(store, id);
        expect((await store.recordPayload(repeat, NOW, PAYLOAD)).kind).toBe("lease-lost");
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
          payload: PAYLOAD,
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
          payload: null,
          manifestKey: null,
          ownerToken: null,
          leaseExpiresAt: null,
        });
        expect(deferred.metadata.lastError).toHaveLength(2_000);
        expect(
          await store.append(tableId, [rec("2023-09-09T00:00:00Z", "late", "1")], NOW),
        ).toEqual({
          inserted: 1,
          duplicates: 0,
        });
      });

      it("refuses the claim itself while a retry is pending or the table is paused, whoever holds the lease", async () => {
        const tableId = await newTable(store, "claim-guard");
        const id = await hotBucket(store, tableId);
        const retryAt = later(NOW, 30_000);
        committed(await store.defer(await acquire(store, id), NOW, retryAt, "boom"));

        const early = await acquire(store, id);
        expect(await store.claim(early, NOW, CUTOFF)).toMatchObject({
          kind: "lease-lost",
          metadata: { state: "hot", retryAt },
        });

        const due = later(NOW, LEASE_MS + 1);
        await store.setPaused(tableId, true, NOW);
        const paused = await acquire(store, id, due);
        expect(await store.claim(paused, due, CUTOFF)).toMatchObject({
          kind: "lease-lost",
          metadata: { state: "hot" },
        });
        await store.setPaused(tableId, false, NOW);
        expect(await store.claim(paused, due, CUTOFF)).toMatchObject({
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
        expect(cleared.metadata).toMatchObject({ payload: null, dereferencedAt: dropped });
      });

      it("refuses to defer an archived bucket", async () => {
        const tableId = await newTable(store, "defer-archived");
        const id = await hotBucket(store, tableId);
        await advanceTo(store, id, "cleanup");

        const result = await store.defer(await acquire(store, id), NOW, NOW, "too late");

        expect(result).toMatchObject({ kind: "lease-lost", metadata: { state: "archived" } });
      });
    });

    describe("restore and archive references", () => {
      /** An archived bucket of three records whose hot rows were cleaned up, and those rows. */
      async function archivedAndCleaned(label: string) {
        const tableId = await newTable(store, label);
        const id = await hotBucket(store, tableId);
        const read = await store.readBucket(id, { limit: 100 });
        if (read.route !== "hot") throw new Error("expected a hot bucket");
        await advanceTo(store, id, "cleanup");
        const lease = await acquire(store, id);
        expect(await store.cleanupBatch(lease, NOW, 100)).toEqual({ kind: "deleted", count: 3 });
        committed(await store.finishCleanup(lease, NOW));
        return { tableId, id, rows: [...read.rows] };
      }

      it("restores an archived bucket: marked, rows back idempotently, then one flip to hot only when every row is present", async () => {
        const { tableId, id, rows } = await archivedAndCleaned("restore");
        const lease = await acquire(store, id);

        const marked = committed(await store.beginRestore(lease, NOW));
        expect(marked.metadata).toMatchObject({
          state: "archived",
          restoreStartedAt: NOW,
          ownerToken: lease.token,
        });
        committed(await store.beginRestore(lease, later(NOW, 1_000)));
        expect((await store.getBucket(id))!.restoreStartedAt).toEqual(NOW);
        expect((await store.readBucket(id, { limit: 100 })).route).toBe("archive");
        await expect(
          store.append(tableId, [rec("2023-05-05T00:00:00Z", "new", "1")], NOW),
        ).rejects.toThrow(BucketNotWritableError);

        expect(await store.restoreRecords(lease, NOW, rows.slice(0, 2))).toEqual({
          kind: "inserted",
          inserted: 2,
          verified: 0,
        });
        expect(await store.finishRestore(lease, NOW, later(NOW, 1_000))).toEqual({
          kind: "rows-mismatch",
          hotRows: 2,
          expected: 3,
        });
        expect((await store.readBucket(id, { limit: 100 })).route).toBe("archive");
        expect(await store.restoreRecords(lease, NOW, rows)).toEqual({
          kind: "inserted",
          inserted: 1,
          verified: 2,
        });
        const changed = { ...rows[0]!, value: text("another value") };
        await expect(store.restoreRecords(lease, NOW, [changed])).rejects.toThrow(
          RecordConflictError,
        );

        const retryAt = later(NOW, 7 * 86_400_000);
        const flipped = await store.finishRestore(lease, NOW, retryAt);
        expect(flipped).toMatchObject({
          kind: "committed",
          metadata: {
            state: "hot",
            phase: "claim",
            payload: null,
            manifestKey: null,
            hotDeleted: false,
            restoreStartedAt: null,
            ownerToken: null,
            attempts: 0,
            retryAt,
            dereferencedAt: NOW,
          },
        });
        const read = await store.readBucket(id, { limit: 100 });
        expect(read.route === "hot" ? read.rows : read).toEqual(rows);
      });

      it("fences restore like archival: no mark on a hot bucket, nothing from a stale owner, no cleanup while restoring", async () => {
        const tableId = await newTable(store, "restore-fence");
        const hot = await hotBucket(store, tableId, bytes(7));
        expect((await store.beginRestore(await acquire(store, hot), NOW)).kind).toBe("lease-lost");

        // Archived but not cleaned up: the restore must keep cleanup away from its rows.
        const id = await hotBucket(store, tableId, bytes(8));
        const read = await store.readBucket(id, { limit: 100 });
        if (read.route !== "hot") throw new Error("expected a hot bucket");
        await advanceTo(store, id, "cleanup");
        const first = await acquire(store, id);
        committed(await store.beginRestore(first, NOW));

        const expiry = later(NOW, LEASE_MS);
        const second = await acquire(store, id, expiry);
        expect(await store.restoreRecords(first, expiry, read.rows)).toMatchObject({
          kind: "lease-lost",
        });
        expect(await store.finishRestore(first, expiry, expiry)).toMatchObject({
          kind: "lease-lost",
        });
        expect((await store.cleanupBatch(second, expiry, 100)).kind).toBe("lease-lost");
        expect(await store.countHotRows(id)).toBe(3);

        expect(await store.restoreRecords(second, expiry, read.rows)).toEqual({
          kind: "inserted",
          inserted: 0,
          verified: 3,
        });
        expect((await store.finishRestore(second, expiry, expiry)).kind).toBe("committed");
      });

      it("lists a table's archive references page by page in key order, flagging buckets in flight", async () => {
        const tableId = await newTable(store, "refs");
        const other = await newTable(store, "refs-other");
        await hotBucket(store, other, bytes(1));
        const ids: BucketId[] = [];
        for (const k of [3, 1, 2, 4]) ids.push(await hotBucket(store, tableId, bytes(k)));
        const [p3, p1, p2, p4] = ids as [BucketId, BucketId, BucketId, BucketId];
        await advanceTo(store, p1, "cleanup"); // archived with payload and manifest
        await advanceTo(store, p2, "export"); // archiving: in flight
        await acquire(store, p4); // hot but leased: in flight

        const seen = [];
        let after: { partitionKey: Uint8Array; bucketKey: string } | null = null;
        for (;;) {
          const page = await store.listArchiveReferences(tableId, after, 3, NOW);
          seen.push(...page);
          if (page.length < 3) break;
          const last = page[page.length - 1]!;
          after = { partitionKey: last.id.partitionKey, bucketKey: last.id.bucketKey };
        }
        expect(
          seen.map((r) => [r.id.partitionKey[0], r.state, r.payloadKey, r.manifestKey, r.inFlight]),
        ).toEqual([
          [1, "archived", PAYLOAD.key, "m/manifest.json", false],
          [2, "archiving", null, null, true],
          [3, "hot", null, null, false],
          [4, "hot", null, null, true],
        ]);
        expect(seen.every((r) => r.id.tableId === tableId)).toBe(true);
        expect(p3.bucketKey).toBe("year:2023");
        // Once the lease has expired the leased bucket is no longer in flight.
        const afterExpiry = await store.listArchiveReferences(
          tableId,
          null,
          10,
          later(NOW, LEASE_MS + 1),
        );
        expect(afterExpiry.find((r) => r.id.partitionKey[0] === 4)!.inFlight).toBe(false);
      });
    });
  });

  describe(`hot store discovery conformance: ${name}`, () => {
    let store: HotStore;
    let cleanup: () => Promise<void>;
    const now = at("2030-01-01T00:00:00Z");
    const query = (overrides: Partial<DiscoveryQuery> = {}): DiscoveryQuery => ({
      now,
      cutoff: CUTOFF,
      limit: 64,
      enqueuedBefore: now,
      ...overrides,
    });
    const summary = (candidates: readonly { id: BucketId; kind: string }[]) =>
      candidates.map((c) => `${c.kind}:${c.id.partitionKey[0]}:${c.id.bucketKey}`);

    beforeAll(async () => {
      ({ store, cleanup } = await open());
      await store.migrate();
    }, OPEN_TIMEOUT_MS);

    afterEach(async () => {
      await retireEverything(store);
    });

    afterAll(async () => {
      await cleanup?.();
    });

    /** Buckets of years 2019..2023 in partitions 1..n, each holding one record. */
    async function seed(tableId: TableId, years: number[], partition = 1): Promise<BucketId[]> {
      await store.append(
        tableId,
        years.map((y) => rec(`${y}-06-01T00:00:00Z`, "k", "v", bytes(partition))),
        NOW,
      );
      return years.map((y) => ({
        tableId,
        partitionKey: bytes(partition),
        bucketKey: `year:${y}`,
      }));
    }

    it("offers eligible, stalled and cleanup buckets oldest bucket_end first, nothing newer than the cutoff and no leased hot bucket", async () => {
      const tableId = await newTable(store, "disc");
      const [y2019, , y2021, y2022] = await seed(tableId, [2019, 2020, 2021, 2022, 2025]);
      await advanceTo(store, y2019!, "cleanup");
      await advanceTo(store, y2021!, "seal");
      await acquire(store, y2022!, now); // a live lease: someone is claiming it right now

      expect(summary(await store.peekCandidates(query()))).toEqual([
        "cleanup:1:year:2019",
        "eligible:1:year:2020",
        "stalled:1:year:2021",
      ]);
      const candidates = await store.peekCandidates(query());
      // The publish commit stamped enqueued_at: its committer enqueues the next phase itself.
      expect(candidates[0]).toMatchObject({ state: "archived", phase: "cleanup" });
      expect(candidates[0]?.enqueuedAt).toBeInstanceOf(Date);
      expect(candidates[0]?.end).toEqual(at("2020-01-01T00:00:00Z"));
      expect(candidates[2]).toMatchObject({ state: "archiving", phase: "seal" });
    });

    it("does not offer an archiving or archived bucket whose lease is live", async () => {
      const tableId = await newTable(store, "live");
      const [archiving, archived] = await seed(tableId, [2019, 2020]);
      await advanceTo(store, archiving!, "export");
      await advanceTo(store, archived!, "cleanup");
      for (const id of [archiving!, archived!]) await acquire(store, id, now);

      expect(await store.peekCandidates(query())).toEqual([]);
      expect(summary(await store.peekCandidates(query({ now: later(now, LEASE_MS) })))).toEqual([
        "stalled:1:year:2019",
        "cleanup:1:year:2020",
      ]);
    });

    it("holds back a deferred bucket until its retry time", async () => {
      const tableId = await newTable(store, "retry");
      const [deferred] = await seed(tableId, [2019, 2020]);
      const retryAt = later(now, 30_000);
      await advanceTo(store, deferred!, "seal");
      committed(await store.defer(await acquire(store, deferred!, now), now, retryAt, "transient"));

      expect(summary(await store.peekCandidates(query()))).toEqual(["eligible:1:year:2020"]);
      expect(summary(await store.peekCandidates(query({ now: later(retryAt, -1) })))).toEqual([
        "eligible:1:year:2020",
      ]);
      expect(summary(await store.peekCandidates(query({ now: retryAt })))).toEqual([
        "eligible:1:year:2019",
        "eligible:1:year:2020",
      ]);
    });

    it("stops offering a paused table's hot buckets but still offers its stalled and cleanup buckets", async () => {
      const tableId = await newTable(store, "paused");
      const [archived, hot, archiving] = await seed(tableId, [2019, 2020, 2021]);
      await advanceTo(store, archived!, "cleanup");
      await advanceTo(store, archiving!, "export");
      await store.setPaused(tableId, true, now);

      expect(summary(await store.peekCandidates(query()))).toEqual([
        "cleanup:1:year:2019",
        "stalled:1:year:2021",
      ]);
      expect(hot).toBeDefined();

      await store.setPaused(tableId, false, now);
      expect(summary(await store.peekCandidates(query()))).toEqual([
        "cleanup:1:year:2019",
        "eligible:1:year:2020",
        "stalled:1:year:2021",
      ]);
    });

    it("returns at most the limit, keeping the oldest", async () => {
      const tableId = await newTable(store, "limit");
      for (let p = 1; p <= 3; p++) await seed(tableId, [2016, 2017, 2018, 2019, 2020], p);
      await advanceTo(store, { tableId, partitionKey: bytes(2), bucketKey: "year:2016" }, "export");

      const candidates = await store.peekCandidates(query({ limit: 4 }));

      expect(candidates).toHaveLength(4);
      expect(candidates.slice(0, 3).map((c) => c.id.bucketKey)).toEqual([
        "year:2016",
        "year:2016",
        "year:2016",
      ]);
      expect(candidates[3]?.id.bucketKey).toBe("year:2017");
      expect(candidates.map((c) => c.kind).sort()).toEqual([
        "eligible",
        "eligible",
        "eligible",
        "stalled",
      ]);
    });

    it("stamps enqueued_at on discovered buckets, hiding them until enqueuedBefore passes the stamp; peeking stamps nothing", async () => {
      const tableId = await newTable(store, "stamp");
      await seed(tableId, [2019, 2020]);

      expect(await store.peekCandidates(query())).toHaveLength(2);
      expect(await store.peekCandidates(query())).toHaveLength(2);

      const discovered = await store.discover(query({ limit: 1 }));
      expect(summary(discovered)).toEqual(["eligible:1:year:2019"]);
      expect(discovered[0]?.enqueuedAt).toEqual(now);
      expect((await store.getBucket(discovered[0]!.id))?.enqueuedAt).toEqual(now);

      const next = later(now, 5_000);
      expect(
        summary(await store.discover(query({ now: next, enqueuedBefore: later(now, -1) }))),
      ).toEqual(["eligible:1:year:2020"]);
      expect(
        await store.discover(query({ now: next, enqueuedBefore: later(now, 1_000) })),
      ).toHaveLength(1);
      expect(
        summary(await store.peekCandidates(query({ now: next, enqueuedBefore: next }))),
      ).toEqual(["eligible:1:year:2019", "eligible:1:year:2020"]);
    });
  });
}

/** Properties of the SQL adapter itself: schema, migrations and commit faults. */
export function sqlHotStoreConformance(
  name: string,
  open: () => Promise<OpenedHotStore<SqlHotStore>>,
): void {
  describe(`SQL hot store: ${name}`, () => {
    let store: SqlHotStore;
    let cleanup: () => Promise<void>;
    let firstRun: number[];
    let secondRun: number[];

    beforeAll(async () => {
      ({ store, cleanup } = await open());
      await store.db.query("CREATE TABLE app_events (id INT8 PRIMARY KEY, note TEXT NOT NULL)");
      await store.db.query("INSERT INTO app_events (id, note) VALUES (1, 'keep me')");
      firstRun = await store.migrate();
      secondRun = await store.migrate();
    }, OPEN_TIMEOUT_MS);

    afterEach(() => {
      store.db.faults = undefined;
    });

    afterAll(async () => {
      await cleanup?.();
    });

    it("applies every migration once: a second run applies nothing", async () => {
      const versions = MIGRATIONS.map((m) => m.version);
      expect(versions).toEqual([1, 2, 3, 4, 5]);
      expect(firstRun).toEqual(versions);
      expect(secondRun).toEqual([]);
      const { rows } = await store.db.query<{ version: string }>(
        "SELECT version FROM pulpitum_v4_migrations ORDER BY version",
      );
      expect(rows.map((r) => Number(r.version))).toEqual(versions);
    });

    it("stores keys and values as BYTEA and event times as TIMESTAMPTZ", async () => {
      const { rows } = await store.db.query<{
        table_name: string;
        column_name: string;
        data_type: string;
      }>(
        `SELECT table_name, column_name, data_type FROM information_schema.columns
          WHERE table_name IN ('pulpitum_v4_records', 'pulpitum_v4_bucket_metadata')
            AND column_name IN ('partition_key', 'sort_key', 'value', 'event_time', 'bucket_end')
          ORDER BY table_name, column_name`,
      );
      expect(rows.map((r) => `${r.table_name}.${r.column_name}: ${r.data_type}`)).toEqual([
        "pulpitum_v4_bucket_metadata.bucket_end: timestamp with time zone",
        "pulpitum_v4_bucket_metadata.partition_key: bytea",
        "pulpitum_v4_records.event_time: timestamp with time zone",
        "pulpitum_v4_records.partition_key: bytea",
        "pulpitum_v4_records.sort_key: bytea",
        "pulpitum_v4_records.value: bytea",
      ]);
    });

    it("leaves tables of other names untouched and creates only pulpitum_v4_ tables", async () => {
      const { rows } = await store.db.query<{ note: string }>("SELECT note FROM app_events");
      expect(rows).toEqual([{ note: "keep me" }]);
      const tables = await store.db.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables
          WHERE table_schema = current_schema() ORDER BY table_name`,
      );
      expect(tables.rows.map((r) => r.table_name)).toEqual([
        "app_events",
        "pulpitum_v4_bucket_metadata",
        "pulpitum_v4_migrations",
        "pulpitum_v4_records",
        "pulpitum_v4_tables",
      ]);
    });

    it("surfaces a lost commit reply as AmbiguousCommitError, and a re-read shows the commit landed", async () => {
      const tableId = await newTable(store, "ambiguous");
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "publish");
      const lease = await acquire(store, id);
      store.db.faults = {
        afterCommit(operation) {
          if (operation === "publish")
            throw new Error("connection reset while COMMIT was in flight");
        },
      };

      await expect(store.publish(lease, NOW)).rejects.toBeInstanceOf(AmbiguousCommitError);

      store.db.faults = undefined;
      expect(await store.getBucket(id)).toMatchObject({ state: "archived", phase: "cleanup" });
    });

    it("retries reads outside a transaction that fail with a serialization failure (40001)", async () => {
      const tableId = await newTable(store, "read-retry");
      const id = await hotBucket(store, tableId);
      await advanceTo(store, id, "export");
      const lease = await acquire(store, id);
      const attempts = new Map<string, number>();
      let injected = 0;
      store.db.faults = {
        beforeQuery(text) {
          const n = (attempts.get(text) ?? 0) + 1;
          attempts.set(text, n);
          if (n > 2) return;
          injected++;
          throw Object.assign(new Error("restart transaction: read too old (injected)"), {
            code: "40001",
            severity: "ERROR",
          });
        },
      };

      expect(await store.getBucket(id)).toMatchObject({ state: "archiving" });
      const read = await store.readBucket(id, { limit: 10 });
      expect(read.route === "hot" ? read.rows : read).toHaveLength(3);
      const page = await store.snapshotPage(lease, NOW, null, 10);
      expect(page.kind === "page" ? page.rows : page).toHaveLength(3);
      expect(injected).toBeGreaterThanOrEqual(6);
    });

    it("keeps every statement of an append and a restore within the message budget, with 100 KiB values", async () => {
      const statements = recordingOf(store).statements;
      const tableId = await newTable(store, "budget");
      const value = new Uint8Array(100 * 1024).fill(7);
      const rows = Array.from({ length: 120 }, (_, i) =>
        rec(`2023-06-01T00:00:00.${String(i).padStart(6, "0")}Z`, `k${i}`, value),
      );
      const from = statements.length;
      await store.append(tableId, rows, NOW);
      const id = { tableId, partitionKey: bytes(1), bucketKey: "year:2023" };
      await advanceTo(store, id, "cleanup");
      const lease = await acquire(store, id);
      committed(await store.beginRestore(lease, NOW));
      const restored = await store.restoreRecords(
        lease,
        NOW,
        rows.map((r) => ({ eventTime: r.eventTime, sortKey: r.sortKey, value: r.value })),
      );
      expect(restored).toEqual({ kind: "inserted", inserted: 0, verified: 120 });

      const sent = statements.slice(from);
      const inserts = sent.filter((st) => st.text.includes("INSERT INTO pulpitum_v4_records"));
      const perStatement = Math.floor(MAX_STATEMENT_BYTES / (100 * 1024));
      expect(inserts.length).toBeGreaterThanOrEqual(2 * Math.ceil(120 / perStatement));
      expect(Math.max(...sent.map(parameterBytes))).toBeLessThanOrEqual(MAX_STATEMENT_BYTES);
    });

    it("writes nothing when a transaction fails just before COMMIT", async () => {
      const tableId = await newTable(store, "before-commit");
      store.db.faults = {
        beforeCommit(operation) {
          if (operation === "append") throw new Error("crash before commit");
        },
      };

      await expect(
        store.append(tableId, [rec("2023-01-01T00:00:00Z", "a", "1")], NOW),
      ).rejects.toThrow(/crash before commit/);

      store.db.faults = undefined;
      expect(
        await store.getBucket({ tableId, partitionKey: bytes(1), bucketKey: "year:2023" }),
      ).toBeNull();
    });
  });
}

/**
 * Run after the other suites of a file: every statement the SQL hot store
 * sent through them carries a cast on each placeholder. CockroachDB cannot
 * infer a placeholder's type inside VALUES or in a SELECT list ("could not
 * determine data type of placeholder"), so none may be left to inference.
 */
export function typedPlaceholderConformance(
  name: string,
  statements: readonly RecordedStatement[],
): void {
  describe(`statements the SQL hot store sent: ${name}`, () => {
    it("casts every placeholder, so CockroachDB can type each one wherever it appears", () => {
      expect(statements.length).toBeGreaterThan(500);
      for (const shape of [
        /JOIN \(VALUES/,
        /FROM \(VALUES/,
        /WITH c AS/,
        /FOR SHARE OF m/,
        /FOR UPDATE/,
        /INSERT INTO pulpitum_v4_records/,
        /INSERT INTO pulpitum_v4_bucket_metadata/,
        /INSERT INTO pulpitum_v4_tables/,
        /LIMIT \$\d+/,
      ]) {
        expect(
          statements.some((st) => shape.test(st.text)),
          String(shape),
        ).toBe(true);
      }
      expect(untypedPlaceholders(statements)).toEqual([]);
    });
  });
}
