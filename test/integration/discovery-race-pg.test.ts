/**
 * Two discovery runs that overlap (a schedule tick while the last run still
 * drains a backlog, or a manual invoke beside the schedule) never enqueue
 * one bucket twice, on real PostgreSQL with two connections (issue 51 §2).
 * Each run selects its page and stamps it in one statement; the second run's
 * snapshot predates the first run's stamps, so only the stamp re-checking
 * its own row under READ COMMITTED keeps it from stamping them again.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import pg from "pg";
import { PgDatabase, type SqlDatabase } from "../../src/adapters/sql/database.js";
import { discover } from "../../src/adapters/sql/hot-store/discovery.js";
import { openPgHotStore } from "../../src/adapters/sql/index.js";
import type { SqlHotStore } from "../../src/adapters/sql/sql-hot-store.js";
import { parseTableId } from "../../src/domain/table.js";
import type { Candidate, DiscoveryQuery } from "../../src/ports/hot-store.js";
import { fixedCutoffs } from "../support/cutoffs.js";
import { freshDatabase } from "../support/integration-resources.js";

const CUTOFF = new Date("2025-01-01T00:00:00Z");

let db: { url: string; drop(): Promise<void> };
let first: SqlHotStore;
let second: SqlHotStore;
let holder: PgDatabase;
let admin: pg.Client;
let tables = 0;

beforeAll(async () => {
  db = await freshDatabase(inject("databaseUrl"));
  first = await openPgHotStore(db.url, { migrate: true });
  second = await openPgHotStore(db.url);
  holder = new PgDatabase(db.url, { isolation: "read committed" });
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
});
afterAll(async () => {
  await admin?.end();
  await holder?.close();
  await second?.close();
  await first?.close();
  await db?.drop();
});

/** A table of `count` eligible yearly buckets, each in a partition of its own (odd bytes in the keys). */
async function eligibleBuckets(count: number): Promise<string[]> {
  const tableId = parseTableId(`race-${++tables}`);
  const now = new Date();
  await first.registerTable(
    { tableId, strategy: "CalendarYearUtc", format: "json", writableBuckets: null },
    now,
  );
  const records = Array.from({ length: count }, (_, i) => ({
    partitionKey: Uint8Array.of(0, 0xff, i & 0xff, i >> 8, 0x5c),
    eventTime: BigInt(Date.UTC(2016 + (i % 8), 5, 1)) * 1000n,
    sortKey: Uint8Array.of(i),
    value: new Uint8Array(0),
  }));
  await first.append(tableId, records, now);
  return records.map((r) => keyOf({ id: { tableId, partitionKey: r.partitionKey } }));
}

const keyOf = (c: { id: { tableId: string; partitionKey: Uint8Array } }) =>
  `${c.id.tableId}/${Buffer.from(c.id.partitionKey).toString("hex")}`;

/** Buckets stamped by an earlier run stay hidden: only never-enqueued ones are candidates. */
function query(): DiscoveryQuery {
  const hideStamped = new Date("2020-01-01T00:00:00Z");
  return { now: new Date(), ...fixedCutoffs(CUTOFF), limit: 64, enqueuedBefore: hideStamped };
}

async function waitForLockWaiter(): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const { rows } = await admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (Number(rows[0]!.n) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error("the second discovery never waited on the first one's row locks");
}

describe("two overlapping discovery runs on PostgreSQL", () => {
  it("the run whose snapshot predates the other's stamps enqueues none of the buckets the other stamped", async () => {
    const buckets = await eligibleBuckets(64);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let stampedFirst!: (candidates: Candidate[]) => void;
    const firstStamped = new Promise<Candidate[]>((resolve) => (stampedFirst = resolve));
    // The first run stamps its page and holds its transaction open.
    const firstRun = holder.transaction(async (tx) => {
      const asWriter = { write: (sql: string, params: unknown[]) => tx.query(sql, params) };
      const page = await discover(asWriter as unknown as SqlDatabase, query());
      stampedFirst(page);
      await held;
      return page;
    }, "held discovery");
    const firstPage = await firstStamped;
    expect(firstPage.map(keyOf).sort()).toEqual([...buckets].sort());

    // The second run starts now: its snapshot does not see the stamps, and it waits on their row locks.
    const secondRun = second.discover(query());
    await waitForLockWaiter();
    release();
    await firstRun;
    const secondPage = await secondRun;

    expect(secondPage.map(keyOf).filter((k) => buckets.includes(k))).toEqual([]);
  });

  it("six pairs of runs started together each enqueue every bucket exactly once between them", async () => {
    for (let attempt = 0; attempt < 6; attempt++) {
      const buckets = await eligibleBuckets(48);
      const [a, b] = await Promise.all([first.discover(query()), second.discover(query())]);
      const mine = (page: Candidate[]) => page.map(keyOf).filter((k) => buckets.includes(k));
      expect([...mine(a), ...mine(b)].sort(), `attempt ${attempt}`).toEqual([...buckets].sort());
    }
  });
});
