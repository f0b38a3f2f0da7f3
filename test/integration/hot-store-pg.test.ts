/**
 * The hot store conformance suite on real PostgreSQL, plus what only real
 * concurrent connections can show: the append fence under races,
 * serialization retries, lost commit replies, and the discovery plan.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import pg from "pg";
import { PgDatabase, type IsolationLevel } from "../../src/adapters/sql/database.js";
import { openPgHotStore } from "../../src/adapters/sql/index.js";
import { DISCOVERY_INDEX } from "../../src/adapters/sql/migrations.js";
import { SqlHotStore } from "../../src/adapters/sql/sql-hot-store.js";
import type { BucketId } from "../../src/domain/bucket.js";
import { AmbiguousCommitError, BucketNotWritableError } from "../../src/errors.js";
import { parseTableId, type TableId } from "../../src/domain/table.js";
import type { TableRecord } from "../../src/domain/record.js";
import type { BucketRow, Lease } from "../../src/ports/hot-store.js";
import {
  hotStoreConformance,
  snapshotStatementConformance,
  sqlHotStoreConformance,
  typedPlaceholderConformance,
} from "../conformance/hot-store.js";
import { recordOnePart } from "../conformance/hot-store/support.js";
import { RecordingDatabase, type RecordedStatement } from "../support/recording-database.js";
import { rowsOf } from "../../src/ports/row-page.js";
import { fixedCutoffs } from "../support/cutoffs.js";

const serverUrl = inject("databaseUrl");
const created: string[] = [];

/** A fresh database on the test server; dropped when the file finishes. */
async function freshDatabaseUrl(): Promise<string> {
  const name = `pulpitum_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  created.push(name);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

afterAll(async () => {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    for (const name of created) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
});

const statements: RecordedStatement[] = [];

const openFresh = async () => {
  const store = new SqlHotStore(
    new RecordingDatabase(new PgDatabase(await freshDatabaseUrl()), statements),
  );
  return { store, cleanup: () => store.close() };
};

hotStoreConformance("PostgreSQL", openFresh);
sqlHotStoreConformance("PostgreSQL", openFresh);
snapshotStatementConformance("PostgreSQL", openFresh);
typedPlaceholderConformance("PostgreSQL", statements);

const NOW = new Date("2025-06-01T00:00:00Z");
const CUTOFF = new Date("2025-01-01T00:00:00Z");
const LEASE_MS = 60_000;

function record(partition: number, i: number, value = `v${i}`): TableRecord {
  return {
    partitionKey: Uint8Array.of(partition & 0xff, partition >> 8),
    eventTime: 1_680_000_000_000_000n + BigInt(i % 97) * 1_000_000n,
    sortKey: new TextEncoder().encode(`k${i}`),
    value: new TextEncoder().encode(value),
  };
}

const identity = (r: { eventTime: bigint; sortKey: Uint8Array }) =>
  `${r.eventTime}/${Buffer.from(r.sortKey).toString("hex")}`;

async function acquire(store: SqlHotStore, id: BucketId, now = NOW): Promise<Lease> {
  for (;;) {
    const result = await store.acquireLease(id, now, LEASE_MS);
    if (result.kind === "acquired") return result.lease;
    if (result.kind === "missing") throw new Error("bucket missing");
    await new Promise((r) => setTimeout(r, 1));
  }
}

async function readAll(store: SqlHotStore, lease: Lease, pageSize: number): Promise<BucketRow[]> {
  const rows: BucketRow[] = [];
  for (;;) {
    const page = await store.snapshotPage(lease, NOW, rows[rows.length - 1] ?? null, pageSize);
    if (page.kind !== "page") throw new Error("lease lost while reading the snapshot");
    rows.push(...rowsOf(page.rows));
    if (page.rows.count < pageSize) return rows;
    // Let racing appenders run between pages, where a missed fence would show.
    await new Promise((r) => setImmediate(r));
  }
}

describe("PostgreSQL hot store under real concurrency", () => {
  let url: string;
  let main: SqlHotStore;

  beforeAll(async () => {
    url = await freshDatabaseUrl();
    main = await openPgHotStore(url, { migrate: true });
  });

  afterAll(async () => {
    await main?.close();
  });

  it("never loses an append that races a claim: each either lands in the snapshot or is rejected as not writable", async () => {
    await raceAppendsAgainstClaims(url, main, "race", 40, "serializable");
  });

  it("lets 30 concurrent appenders share one bucket: every append succeeds and every record is stored", async () => {
    const tableId = parseTableId("hot-bucket");
    await main.registerTable(
      { tableId, strategy: "CalendarYearUtc", format: "json", writableBuckets: null },
      NOW,
    );
    const databases = Array.from({ length: 30 }, () => new PgDatabase(url, { max: 1 }));
    const stores = databases.map((db) => new SqlHotStore(db));
    let failures = 0;
    try {
      await Promise.all(
        stores.map(async (store, s) => {
          for (let round = 0; round < 10; round++) {
            const base = s * 1_000 + round * 10;
            await store
              .append(
                tableId,
                Array.from({ length: 5 }, (_, i) => record(7, base + i)),
                NOW,
              )
              .catch(() => failures++);
          }
        }),
      );
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    expect(failures).toBe(0);
    const id: BucketId = {
      tableId,
      partitionKey: record(7, 0).partitionKey,
      bucketKey: "year:2023",
    };
    const claim = await main.claim(await acquire(main, id), NOW, fixedCutoffs(CUTOFF));
    expect(claim.kind).toBe("committed");
    expect(await readAll(main, await acquire(main, id), 1_000)).toHaveLength(30 * 10 * 5);
  });

  it("retries a transaction that fails with a serialization failure (40001) until it commits", async () => {
    const tableId = parseTableId("retry-40001");
    await main.registerTable(
      { tableId, strategy: "CalendarYearUtc", format: "json", writableBuckets: null },
      NOW,
    );
    // Two registrations both read the table row, then both update it: under
    // SERIALIZABLE the second update must fail with 40001 and run again.
    let arrived = 0;
    let bothRead!: () => void;
    const barrier = new Promise<void>((resolve) => (bothRead = resolve));
    const faults = {
      async afterStatement(operation: string, statement: number) {
        if (operation !== "registerTable" || statement !== 1) return;
        if (++arrived === 2) bothRead();
        await Promise.race([barrier, new Promise((r) => setTimeout(r, 2_000))]);
      },
    };
    const databases = [new PgDatabase(url, { faults }), new PgDatabase(url, { faults })];
    const stores = databases.map((db) => new SqlHotStore(db));
    try {
      const results = await Promise.all(
        stores.map((store, i) =>
          store.registerTable(
            { tableId, strategy: "CalendarYearUtc", format: "json", writableBuckets: 10 + i },
            NOW,
          ),
        ),
      );
      expect(results).toEqual(["updated", "updated"]);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    expect(databases.reduce((sum, db) => sum + db.stats.serializationRetries, 0)).toBeGreaterThan(
      0,
    );
  });

  it("reports a lost commit reply on append as AmbiguousCommitError, and a re-read finds the records", async () => {
    const tableId = parseTableId("lost-reply");
    await main.registerTable(
      { tableId, strategy: "CalendarYearUtc", format: "json", writableBuckets: null },
      NOW,
    );
    const db = new PgDatabase(url, {
      faults: {
        afterCommit(operation) {
          if (operation === "append") throw new Error("socket closed before the COMMIT reply");
        },
      },
    });
    const store = new SqlHotStore(db);
    try {
      await expect(store.append(tableId, [record(9, 1)], NOW)).rejects.toBeInstanceOf(
        AmbiguousCommitError,
      );
      db.faults = undefined;
      expect(await store.append(tableId, [record(9, 1)], NOW)).toEqual({
        inserted: 0,
        duplicates: 1,
      });
    } finally {
      await store.close();
    }
  });

  it("serves discovery from the (state, hot_deleted, bucket_end) index over 20,000 metadata rows", async () => {
    const tableId: TableId = parseTableId("plan");
    await main.registerTable(
      { tableId, strategy: "CalendarDayUtc", format: "json", writableBuckets: null },
      NOW,
    );
    await main.db.query(
      `INSERT INTO pulpitum_v4_bucket_metadata
         (table_id, partition_key, bucket_key, bucket_strategy, bucket_start, bucket_end,
          state, phase, hot_deleted, created_at, updated_at)
       SELECT $1, int8send(g), 'day:' || to_char(d, 'YYYY-MM-DD'), 'CalendarDayUtc', d, d + interval '1 day',
              CASE WHEN g % 100 = 0 THEN 'hot' ELSE 'archived' END,
              CASE WHEN g % 100 = 0 THEN 'claim' ELSE 'done' END,
              g % 100 <> 0, now(), now()
         FROM generate_series(1, 20000) AS g,
              LATERAL (SELECT timestamptz '2000-01-01' + (g % 3000) * interval '1 day' AS d) AS t`,
      [tableId],
    );
    await main.db.query("ANALYZE pulpitum_v4_bucket_metadata");

    const plan = await main.explainDiscovery({
      now: NOW,
      ...fixedCutoffs(CUTOFF),
      limit: 64,
      enqueuedBefore: NOW,
    });

    expect(plan).toContain(DISCOVERY_INDEX);
    expect(plan).not.toMatch(/Seq Scan on pulpitum_v4_bucket_metadata/);
    const candidates = await main.peekCandidates({
      now: NOW,
      ...fixedCutoffs(CUTOFF),
      limit: 64,
      enqueuedBefore: NOW,
    });
    expect(candidates).toHaveLength(64);
    expect(candidates.every((c, i) => i === 0 || candidates[i - 1]!.end <= c.end)).toBe(true);
  });
});

/**
 * Appenders on four pools race a claim and a snapshot, `iterations` times:
 * every committed append must be in the snapshot and every append after the
 * claim refused.
 */
async function raceAppendsAgainstClaims(
  url: string,
  main: SqlHotStore,
  label: string,
  iterations: number,
  isolation: IsolationLevel,
): Promise<void> {
  const tableId = parseTableId(label);
  await main.registerTable(
    { tableId, strategy: "CalendarYearUtc", format: "json", writableBuckets: null },
    NOW,
  );
  const appenders = await Promise.all(
    Array.from({ length: 4 }, () => openPgHotStore(url, { max: 2, isolation })),
  );
  const claimer = await openPgHotStore(url, { max: 2, isolation });
  let rejected = 0;
  let committedTotal = 0;
  try {
    for (let iteration = 0; iteration < iterations; iteration++) {
      const partition = iteration + 1;
      await main.append(tableId, [record(partition, 0)], NOW);
      const id: BucketId = {
        tableId,
        partitionKey: record(partition, 0).partitionKey,
        bucketKey: "year:2023",
      };
      const committed = new Set<string>([identity(record(partition, 0))]);
      const attempted = new Set<string>(committed);
      let next = 1;
      let claimed = false;

      const appendLoop = async (store: SqlHotStore) => {
        for (;;) {
          const batch = Array.from({ length: 1 + (next % 3) }, () => record(partition, next++));
          for (const r of batch) attempted.add(identity(r));
          try {
            await store.append(tableId, batch, NOW);
            for (const r of batch) committed.add(identity(r));
          } catch (error) {
            if (!(error instanceof BucketNotWritableError)) throw error;
            rejected++;
            return;
          }
          if (claimed && next > 10_000) throw new Error("appends kept succeeding after the claim");
        }
      };
      const claimAndSnapshot = async () => {
        await new Promise((r) => setTimeout(r, Math.random() * 15));
        const lease = await acquire(claimer, id);
        const result = await claimer.claim(lease, NOW, fixedCutoffs(CUTOFF));
        expect(result.kind).toBe("committed");
        claimed = true;
        return await readAll(claimer, await acquire(claimer, id), 3);
      };

      const [snapshot] = await Promise.all([
        claimAndSnapshot(),
        ...appenders.map((store) => appendLoop(store)),
      ]);

      const seen = new Set(snapshot.map(identity));
      expect(seen.size).toBe(snapshot.length);
      for (const key of committed)
        expect(seen.has(key), `committed record ${key} missing`).toBe(true);
      for (const key of seen) expect(attempted.has(key)).toBe(true);
      committedTotal += committed.size;
    }
  } finally {
    await Promise.all([...appenders, claimer].map((s) => s.close()));
  }
  expect(rejected).toBe(4 * iterations);
  expect(committedTotal).toBeGreaterThan(iterations);
}

/** An archived bucket of `count` records whose payload row count matches, for restore races. */
async function archivedBucket(store: SqlHotStore, label: string, count: number) {
  const tableId = parseTableId(label);
  await store.registerTable(
    { tableId, strategy: "CalendarYearUtc", format: "json", writableBuckets: null },
    NOW,
  );
  const rows = Array.from({ length: count }, (_, i) => record(11, i));
  await store.append(tableId, rows, NOW);
  const id: BucketId = { tableId, partitionKey: rows[0]!.partitionKey, bucketKey: "year:2023" };
  const payload = {
    key: "p/restore-race.json",
    sha256: "c".repeat(64),
    rowCount: count,
    byteLength: 1,
  };
  expect((await store.claim(await acquire(store, id), NOW, fixedCutoffs(CUTOFF))).kind).toBe(
    "committed",
  );
  expect((await recordOnePart(store, await acquire(store, id), NOW, payload)).kind).toBe(
    "committed",
  );
  expect((await store.recordManifest(await acquire(store, id), NOW, "m/x.json")).kind).toBe(
    "committed",
  );
  expect((await store.publish(await acquire(store, id), NOW)).kind).toBe("committed");
  return { id, rows };
}

describe.each(["serializable", "repeatable read", "read committed"] as const)(
  "PostgreSQL hot store at %s isolation",
  (isolation) => {
    let url: string;
    let main: SqlHotStore;
    const label = isolation.replace(" ", "-");

    beforeAll(async () => {
      url = await freshDatabaseUrl();
      main = await openPgHotStore(url, { migrate: true });
    });

    afterAll(async () => {
      await main?.close();
    });

    it("never loses an append that races a claim", async () => {
      await raceAppendsAgainstClaims(url, main, `race-${label}`, 12, isolation);
    });

    it("a cleanup whose lease a restore takes over mid-transaction never deletes the restored rows", async () => {
      const { id, rows } = await archivedBucket(main, `cleanup-restore-${label}`, 200);
      const cleanerDb = new PgDatabase(url, { isolation });
      const cleaner = new SqlHotStore(cleanerDb);
      const stale = await acquire(cleaner, id, NOW);
      const restoreAt = new Date(NOW.getTime() + LEASE_MS + 1);
      const restore = async () => {
        const lease = await acquire(main, id, restoreAt);
        expect((await main.beginRestore(lease, restoreAt)).kind).toBe("committed");
        const batch = await main.restoreRecords(
          lease,
          restoreAt,
          rows.map((r) => ({ eventTime: r.eventTime, sortKey: r.sortKey, value: r.value })),
        );
        expect(batch.kind).toBe("inserted");
        return (await main.finishRestore(lease, restoreAt, restoreAt)).kind;
      };
      // The restore runs right after the cleanup's first statement, while its
      // transaction is open, and gets half a second before cleanup goes on.
      let rival: Promise<string> | undefined;
      cleanerDb.faults = {
        async afterStatement(operation, statement) {
          if (operation !== "cleanupBatch" || statement !== 1 || rival !== undefined) return;
          rival = restore();
          await Promise.race([rival, new Promise((r) => setTimeout(r, 500))]);
        },
      };
      try {
        await cleaner.cleanupBatch(stale, NOW, 1_000);
        expect(await rival).toBe("committed");
      } finally {
        await cleaner.close();
      }
      const after = await main.getBucket(id);
      expect(after?.state).toBe("hot");
      expect(await main.countHotRows(id)).toBe(rows.length);
    });
  },
);
