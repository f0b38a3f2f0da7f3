/**
 * Outages never quarantine a healthy bucket, on a real PostgreSQL that goes
 * away the ways real ones do: every connection dropped and new ones refused
 * for a second (a failover, a network blip) while phases run and renew
 * their leases, and backends terminated in the middle of a snapshot page.
 * Before issue 39, three such blips or four such terminations quarantined
 * a healthy bucket: the phase could not record its outage (its release
 * failed in the same blip, or the page's dead connection was handed
 * back to the pool for the failure handler's next statement), the lease
 * expired, and each takeover counted an attempt.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { MemoryObjectStore } from "../../src/adapters/object-store/memory.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import type { BucketId } from "../../src/domain/bucket.js";
import type { TableRecord } from "../../src/domain/record.js";
import { parseRfc3339Micros } from "../../src/domain/time.js";
import { parseTableId } from "../../src/domain/table.js";
import { errorMessage } from "../../src/errors.js";
import { systemClock } from "../../src/ports/clock.js";
import type {
  ArchiverContext,
  ArchiverSettings,
  PhaseOutcome,
} from "../../src/usecases/context.js";
import { runNextPhase } from "../../src/usecases/run-next-phase.js";
import {
  startBlippingProxy,
  terminateReads,
  type BlippingProxy,
} from "../support/database-blips.js";
import { freshDatabase } from "../support/integration-resources.js";
import {
  chatRecords,
  expectFullyArchived,
  harnessOn,
  seedTable,
  type Harness,
} from "../support/workflow-harness.js";

const TABLE = parseTableId("chat");
const MAX_ATTEMPTS = 3;

/** Settings of a worker whose leases, retries and cleanup run in seconds of real time. */
const SETTINGS: Partial<ArchiverSettings> = {
  leaseMs: 3_000,
  renewalMs: 1_000,
  retryMs: 200,
  maxAttempts: MAX_ATTEMPTS,
  snapshotPageSize: 500,
  cleanupBatchSize: 25,
  cleanupMaxRowsPerSecond: 100,
};

/** `count` records of one partition in March 2025, each with 2 KiB of incompressible value. */
function largeRecords(count: number): TableRecord[] {
  const base = parseRfc3339Micros("2025-03-01T00:00:00Z");
  return Array.from({ length: count }, (_, i) => {
    const sortKey = new Uint8Array(8);
    new DataView(sortKey.buffer).setBigUint64(0, BigInt(i));
    return {
      partitionKey: new TextEncoder().encode("c-1"),
      eventTime: base + BigInt(i) * 1_000_000n,
      sortKey,
      value: new Uint8Array(randomBytes(2048)),
    };
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Run phases of `id` as a worker would, on the real clock, until it is
 * archived with its hot rows gone, quarantined, or `timeoutMs` passed:
 * waiting out retry times and live leases, and shrugging off a database
 * that does not answer between phases.
 */
async function archiveAsAWorker(
  ctx: ArchiverContext,
  id: BucketId,
  timeoutMs: number,
): Promise<PhaseOutcome[]> {
  const outcomes: PhaseOutcome[] = [];
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    try {
      const m = await ctx.hotStore.getBucket(id);
      if (m === null) throw new Error("the bucket vanished");
      if ((m.state === "archived" && m.hotDeleted) || m.quarantinedAt !== null) return outcomes;
      const outcome = await runNextPhase(ctx, id);
      outcomes.push(outcome);
      if (outcome.retryAt !== undefined)
        await sleep(Math.max(0, outcome.retryAt.getTime() - Date.now()) + 10);
      else if (outcome.result === "busy") await sleep(200);
    } catch (error) {
      // The worker's invocation failed (the database did not answer): the message comes back.
      outcomes.push({
        bucket: id,
        phase: null,
        result: "done",
        next: null,
        durationMs: 0,
        reason: errorMessage(error),
      });
      await sleep(100);
    }
  }
  throw new Error(
    `the bucket was not archived within ${timeoutMs} ms: ${JSON.stringify(outcomes.slice(-5))}`,
  );
}

describe("outages never quarantine a healthy bucket on PostgreSQL", () => {
  const serverUrl = inject("databaseUrl");
  const closers: (() => Promise<void> | void)[] = [];
  let proxy: BlippingProxy;

  beforeAll(async () => {
    proxy = await startBlippingProxy(serverUrl);
    closers.push(() => proxy.close());
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  /** A database of its own behind the proxy, one bucket of `records`, and a worker's context. */
  async function world(
    records: TableRecord[],
    options: { poolMax?: number; settings?: Partial<ArchiverSettings> } = {},
  ) {
    const { poolMax } = options;
    const db = await freshDatabase(serverUrl);
    const store = new SqlHotStore(
      new PgDatabase(proxy.urlFor(db.url), poolMax === undefined ? {} : { max: poolMax }),
    );
    await store.migrate();
    closers.push(
      () => db.drop(),
      () => store.close(),
    );
    const h: Harness<MemoryObjectStore> = harnessOn(store, new MemoryObjectStore(), {
      ...SETTINGS,
      ...options.settings,
    });
    const buckets = await seedTable(h, TABLE, "CalendarMonthUtc", "parquet", records);
    const id = [...buckets.values()][0]!.id;
    const ctx: ArchiverContext = { ...h.process().ctx, clock: systemClock };
    return { h, ctx, id, buckets, database: new URL(db.url).pathname.slice(1), adminUrl: db.url };
  }

  it("three one-second blips while phases run and renew their leases leave attempts at 0: the bucket archives every record once, never quarantined", async () => {
    const { h, ctx, id, buckets } = await world(chatRecords([3], 600, ["c-1"]));
    const blips = (async () => {
      // Once cleanup runs (it lasts seconds at 100 rows/s), take the database away three times.
      while ((await h.inner.getBucket(id).catch(() => null))?.state !== "archived") await sleep(50);
      for (let i = 0; i < 3; i++) {
        await sleep(700);
        await proxy.blip(1_000);
      }
    })();
    const outcomes = await archiveAsAWorker(ctx, id, 120_000);
    await blips;
    const metadata = (await h.inner.getBucket(id))!;

    expect(proxy.blips).toBeGreaterThanOrEqual(3);
    expect(metadata.quarantinedAt, JSON.stringify(outcomes)).toBeNull();
    expect(metadata).toMatchObject({ state: "archived", hotDeleted: true, attempts: 0 });
    await expectFullyArchived(h, buckets);
  });

  it("a statement after a read of binary rows the server terminated gets a live connection, not the dead one", async () => {
    const db = await freshDatabase(serverUrl);
    const database = new PgDatabase(db.url, { max: 1 });
    closers.push(
      () => db.drop(),
      () => database.close(),
    );
    const slow = "SELECT g, pg_sleep(0.01) FROM generate_series(1, 2000) g";
    const killer = terminateReads(db.url, new URL(db.url).pathname.slice(1), 1, slow);
    // The failure handler's next statement follows the failed read at once, as in a phase.
    const next = await database.readBinaryRows(slow, []).then(
      () => expect.fail("the read was not terminated"),
      (error: unknown) => {
        expect(String(error)).toMatch(/terminat/i);
        return database.query<{ one: number }>("SELECT 1 AS one");
      },
    );
    expect(next.rows).toEqual([{ one: 1 }]);
    expect(await killer.stop()).toBe(1);
  });

  it("four backends terminated in the middle of a snapshot page leave attempts at 0: the bucket archives every record once, never quarantined", async () => {
    // Pages of 4 MiB (2,000 rows of 2 KiB), so each page runs long enough to be caught.
    const { h, ctx, id, buckets, database, adminUrl } = await world(largeRecords(10_000), {
      poolMax: 1,
      settings: { snapshotPageSize: 2_000, cleanupBatchSize: 5_000, cleanupMaxRowsPerSecond: 0 },
    });
    const killer = terminateReads(adminUrl, database, 4);
    const outcomes = await archiveAsAWorker(ctx, id, 180_000);
    const killed = await killer.stop();
    const metadata = (await h.inner.getBucket(id))!;

    expect(killed).toBe(4);
    expect(metadata.quarantinedAt, JSON.stringify(outcomes)).toBeNull();
    expect(metadata).toMatchObject({ state: "archived", hotDeleted: true, attempts: 0 });
    await expectFullyArchived(h, buckets);
  });
});
