/**
 * The database timeouts (PULPITUM_DB_*_TIMEOUT_SECONDS) against real
 * PostgreSQL and real stalled sockets: each turns a call that would hang into
 * an error the archiver handles, and a write is ambiguous only when its reply
 * was lost, never when the server refused it.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { PgDatabase, PG_CLIENT_BACKSTOP_MS } from "../../src/adapters/sql/database.js";
import { METADATA_TABLE } from "../../src/adapters/sql/migrations.js";
import { SqlHotStore } from "../../src/adapters/sql/sql-hot-store.js";
import type { BucketId } from "../../src/domain/bucket.js";
import { parseTableId } from "../../src/domain/table.js";
import { AmbiguousCommitError } from "../../src/errors.js";
import { parseConfig } from "../../src/config/config.js";
import { openAdapters } from "../../src/open-adapters.js";
import { freshDatabase } from "../support/integration-resources.js";
import {
  settleWithin,
  startBlackholeProxy,
  startSilentServer,
} from "../support/stalled-endpoints.js";

const NOW = new Date("2026-06-01T00:00:00Z");
const tableId = parseTableId("timeouts");
const partitionKey = new Uint8Array([1, 2, 3]);
const id: BucketId = { tableId, partitionKey, bucketKey: "year:2025" };
const noTimeouts = { connectMs: 0, statementMs: 0, idleInTransactionMs: 0 };

let database: { url: string; drop(): Promise<void> };
let admin: pg.Pool;

beforeAll(async () => {
  database = await freshDatabase(inject("databaseUrl"));
  admin = new pg.Pool({ connectionString: database.url, max: 3 });
  const store = new SqlHotStore(new PgDatabase(database.url));
  try {
    await store.migrate();
    await store.registerTable(
      { tableId, strategy: "CalendarYearUtc", format: "json", writableBuckets: null },
      NOW,
    );
    await store.append(
      tableId,
      [
        {
          partitionKey,
          eventTime: BigInt(Date.parse("2025-03-01T00:00:00Z")) * 1000n,
          sortKey: new Uint8Array([9]),
          value: new Uint8Array([42]),
        },
      ],
      NOW,
    );
  } finally {
    await store.close();
  }
});

afterAll(async () => {
  await admin.end();
  await database.drop();
});

async function lastError(): Promise<string | null> {
  const { rows } = await admin.query<{ last_error: string | null }>(
    `SELECT last_error FROM ${METADATA_TABLE} WHERE table_id = $1 AND partition_key = $2`,
    [tableId, Buffer.from(partitionKey)],
  );
  return rows[0]!.last_error;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("the database statement timeout", () => {
  it("cancels a fenced write stuck behind a lock: the write fails as refused (57014), not ambiguous, and changes nothing", async () => {
    // Prepare: another session holds the bucket's metadata row.
    const store = new SqlHotStore(
      new PgDatabase(database.url, {
        timeouts: { connectMs: 5000, statementMs: 1000, idleInTransactionMs: 0 },
      }),
    );
    const holder = await admin.connect();
    const before = await store.getBucket(id);
    try {
      await holder.query("BEGIN");
      await holder.query(
        `SELECT 1 FROM ${METADATA_TABLE} WHERE table_id = $1 AND partition_key = $2 FOR UPDATE`,
        [tableId, Buffer.from(partitionKey)],
      );

      // Act
      const outcome = await settleWithin(store.acquireLease(id, NOW, 60_000), 15_000);

      // Assess
      expect(outcome.settled).toBe("rejected");
      const error = (outcome as { error: unknown }).error;
      expect(error).not.toBeInstanceOf(AmbiguousCommitError);
      expect((error as { code?: string }).code).toBe("57014");
    } finally {
      await holder.query("ROLLBACK");
      holder.release();
    }
    const after = await store.getBucket(id);
    await store.close();
    expect(after?.generation).toBe(before?.generation);
    expect(after?.ownerToken).toBeNull();
  });

  it("cancels a read running longer than the timeout", async () => {
    const db = new PgDatabase(database.url, {
      timeouts: { connectMs: 5000, statementMs: 500, idleInTransactionMs: 0 },
    });
    try {
      const outcome = await settleWithin(db.query("SELECT pg_sleep(30)"), 15_000);
      expect(outcome.settled).toBe("rejected");
      expect(((outcome as { error: unknown }).error as { code?: string }).code).toBe("57014");
      // The pool is still usable afterwards.
      expect((await db.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    } finally {
      await db.close();
    }
  });
});

describe("the runtime built from the configuration", () => {
  it("bounds the hot store's statements by PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS", async () => {
    const config = parseConfig(
      {
        DATABASE_URL: database.url,
        PULPITUM_ARCHIVE_URL: "file:///tmp/pulpitum-timeouts-unused",
        PULPITUM_DB_STATEMENT_TIMEOUT_SECONDS: "1",
      },
      { cwd: process.cwd() },
    );
    const runtime = await openAdapters(config);
    const holder = await admin.connect();
    try {
      await holder.query("BEGIN");
      await holder.query(
        `SELECT 1 FROM ${METADATA_TABLE} WHERE table_id = $1 AND partition_key = $2 FOR UPDATE`,
        [tableId, Buffer.from(partitionKey)],
      );
      const outcome = await settleWithin(runtime.hotStore.acquireLease(id, NOW, 60_000), 15_000);
      expect(outcome.settled).toBe("rejected");
      expect(((outcome as { error: unknown }).error as { code?: string }).code).toBe("57014");
    } finally {
      await holder.query("ROLLBACK");
      holder.release();
      await runtime.close();
    }
  });
});

describe("the idle-in-transaction timeout", () => {
  it("ends a transaction its client stopped driving: its locks are released at once, it commits nothing, and the process survives", async () => {
    // Prepare
    const db = new PgDatabase(database.url, {
      timeouts: { connectMs: 5000, statementMs: 0, idleInTransactionMs: 1000 },
    });
    const stalledMs = 4000;
    let stallEndedAt = 0;
    const stalled = db.transaction(async (tx) => {
      await tx.query(
        `UPDATE ${METADATA_TABLE} SET last_error = 'stalled writer' WHERE table_id = $1 AND partition_key = $2`,
        [tableId, Buffer.from(partitionKey)],
      );
      await sleep(stalledMs);
      stallEndedAt = Date.now();
      await tx.query("SELECT 1");
    }, "stalled writer");
    stalled.catch(() => undefined);
    await sleep(200);

    // Act: a rival waits for the row lock (a lock_timeout shorter than the stall guards the test).
    const rival = await admin.connect();
    let rivalDoneAt = 0;
    try {
      await rival.query("SET lock_timeout = '3s'");
      await rival.query(
        `UPDATE ${METADATA_TABLE} SET last_error = 'rival' WHERE table_id = $1 AND partition_key = $2`,
        [tableId, Buffer.from(partitionKey)],
      );
      rivalDoneAt = Date.now();
      await rival.query("RESET lock_timeout");
    } finally {
      rival.release();
    }
    const outcome = await settleWithin(stalled, 15_000);
    await db.close();

    // Assess
    expect(rivalDoneAt).toBeGreaterThan(0);
    expect(stallEndedAt === 0 || rivalDoneAt < stallEndedAt).toBe(true);
    expect(outcome.settled).toBe("rejected");
    expect(await lastError()).toBe("rival");
  });
});

describe("the connect timeout", () => {
  it("fails a query to a server that accepts connections and never answers", async () => {
    const silent = await startSilentServer();
    const url = `postgresql://postgres@127.0.0.1:${silent.port}/postgres`;
    const db = new PgDatabase(url, {
      timeouts: { connectMs: 1000, statementMs: 0, idleInTransactionMs: 0 },
    });
    try {
      const outcome = await settleWithin(db.query("SELECT 1"), 15_000);
      expect(outcome.settled).toBe("rejected");
      expect(String((outcome as { error: unknown }).error)).toMatch(/timeout/i);
    } finally {
      await silent.close();
      await db.close().catch(() => undefined);
    }
  });
});

describe("a connection that goes silent mid-statement", () => {
  it("fails the statement a little after the statement timeout, and a write cut off that way is ambiguous", async () => {
    // Prepare
    const proxy = await startBlackholeProxy(Number(new URL(database.url).port));
    const url = new URL(database.url);
    url.port = String(proxy.port);
    const db = new PgDatabase(url.toString(), {
      timeouts: { connectMs: 5000, statementMs: 1000, idleInTransactionMs: 0 },
    });
    try {
      await db.query("SELECT 1"); // a pooled connection through the proxy
      proxy.blackhole();

      // Act
      const outcome = await settleWithin(
        db.write(
          `UPDATE ${METADATA_TABLE} SET last_error = 'lost reply' WHERE table_id = $1`,
          [tableId],
          "lost reply",
        ),
        1000 + PG_CLIENT_BACKSTOP_MS + 10_000,
      );

      // Assess
      expect(outcome.settled).toBe("rejected");
      expect((outcome as { error: unknown }).error).toBeInstanceOf(AmbiguousCommitError);
    } finally {
      await proxy.close();
      await db.close().catch(() => undefined);
    }
  });

  it("without timeouts the same statement is still waiting at the deadline (what the timeouts prevent)", async () => {
    const proxy = await startBlackholeProxy(Number(new URL(database.url).port));
    const url = new URL(database.url);
    url.port = String(proxy.port);
    const db = new PgDatabase(url.toString(), { timeouts: noTimeouts });
    try {
      await db.query("SELECT 1");
      proxy.blackhole();
      const outcome = await settleWithin(db.query("SELECT 1"), 3000);
      expect(outcome.settled).toBe("deadline");
    } finally {
      await proxy.close();
      await db.close().catch(() => undefined);
    }
  });
});
