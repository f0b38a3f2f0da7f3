/**
 * Reads of binary rows (every export's snapshot pages, wire-rows.ts) on a
 * real PostgreSQL: what the server sends decodes to what was stored, to the
 * extremes of a timestamp; notices in the middle of the rows cost no row; a
 * failed statement rejects and the next one gets a working connection. And
 * a finished command exits at once: a read leaves no client-side
 * `query_timeout` timer armed once it settles. Such a timer kept
 * `pulpitum archive --once` and `npm start` alive for the statement timeout
 * plus the backstop (65 s) after their summary.
 */
import { createHook } from "node:async_hooks";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { PgDatabase } from "../../src/adapters/sql/database.js";
import { decodeSnapshotRows } from "../../src/adapters/sql/hot-store/snapshot-rows.js";
import { formatMicrosRfc3339, parseRfc3339Micros } from "../../src/domain/time.js";
import { rowsOf } from "../../src/ports/row-page.js";
import { freshDatabase } from "../support/integration-resources.js";

/**
 * The timers created while `work` runs that are still armed once it settles.
 * Tracked by their own ids, so a timer of the test runner's that fires or is
 * armed meanwhile cannot make the count drift (a plain count of active
 * `Timeout` resources did, and failed CI once).
 */
async function timersLeftArmedBy(work: () => Promise<void>): Promise<number> {
  const armed = new Set<number>();
  const hook = createHook({
    init(id, type) {
      if (type === "Timeout") armed.add(id);
    },
    destroy(id) {
      armed.delete(id);
    },
  }).enable();
  try {
    await work();
    // destroy hooks of timers cleared in the last tick run on the next one
    await new Promise<void>((resolve) => setImmediate(resolve));
  } finally {
    hook.disable();
  }
  return armed.size;
}

describe("PostgreSQL binary rows", () => {
  let url: string;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ url, drop } = await freshDatabase(inject("databaseUrl")));
  });
  afterAll(async () => {
    await drop();
  });

  it("leaves no timer armed after a read of binary rows settles, with a statement timeout in force", async () => {
    const db = new PgDatabase(url, {
      timeouts: { connectMs: 5000, statementMs: 60_000, idleInTransactionMs: 0 },
    });
    const left = await timersLeftArmedBy(async () => {
      try {
        for (let i = 0; i < 3; i++) {
          const read = await db.readBinaryRows(
            "SELECT g AS n FROM generate_series(1, $1::INT8) AS g",
            [1000],
          );
          expect(read.rows).toBe(1000);
          expect(read.bytes.byteLength).toBe(1000 * (1 + 4 + 2 + 4 + 8));
        }
        await expect(db.readBinaryRows("SELECT 1/0 AS boom", [])).rejects.toThrow(
          /division by zero/,
        );
      } finally {
        await db.close();
      }
    });
    expect(left).toBe(0);
  });

  it("decode to the event times, keys and values sent, from the year 1 to 9999, every byte value and empty", async () => {
    const db = new PgDatabase(url, { max: 1 });
    try {
      const times = [
        "0001-01-01T00:00:00.000001Z",
        "1744-01-01T00:00:00.999999Z",
        "1969-12-31T23:59:59.999999Z",
        "2000-01-01T00:00:00Z",
        "2255-06-05T23:47:34.740991Z",
        "9999-12-31T23:59:59.999999Z",
      ].map((t) => parseRfc3339Micros(t));
      const everyByte = Uint8Array.from({ length: 256 }, (_, i) => i);
      const values = [new Uint8Array(0), everyByte, new Uint8Array(300_000).fill(0xee)];
      const rows = times.map((t, i) => ({
        eventTime: t,
        sortKey: i % 2 === 0 ? everyByte : new Uint8Array(0),
        value: values[i % values.length]!,
      }));
      const p: unknown[] = [];
      const select = rows
        .map((r) => {
          p.push(formatMicrosRfc3339(r.eventTime), r.sortKey, r.value);
          const n = p.length;
          return `SELECT $${n - 2}::TIMESTAMPTZ AS event_time, $${n - 1}::BYTEA AS sort_key, $${n}::BYTEA AS value`;
        })
        .join(" UNION ALL ");
      const read = await db.readBinaryRows(select, p);
      const decoded = rowsOf(decodeSnapshotRows(read, rows.length));
      const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
      expect(decoded.map((r) => [r.eventTime, hex(r.sortKey), hex(r.value)])).toEqual(
        rows.map((r) => [r.eventTime, hex(r.sortKey), hex(r.value)]),
      );
    } finally {
      await db.close();
    }
  });

  it("read every row around notices the server sends between them, and keep the connection in step", async () => {
    const db = new PgDatabase(url, { max: 1 });
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query(`CREATE OR REPLACE FUNCTION noisy(n INT8) RETURNS INT8 LANGUAGE plpgsql AS $$
        BEGIN IF n % 7 = 0 THEN RAISE NOTICE 'row %', n; END IF; RETURN n; END $$`);
      const read = await db.readBinaryRows(
        "SELECT noisy(g) AS n FROM generate_series(1, $1::INT8) AS g",
        [500],
      );
      expect(read.rows).toBe(500);
      const view = new DataView(read.bytes.buffer, read.bytes.byteOffset, read.bytes.byteLength);
      const ns = Array.from({ length: 500 }, (_, i) => Number(view.getBigInt64(i * 19 + 11)));
      expect(ns).toEqual(Array.from({ length: 500 }, (_, i) => i + 1));
      // The connection is still in step: its next statement reads its own rows.
      expect((await db.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    } finally {
      await admin.end();
      await db.close();
    }
  });

  it("reject a statement the server refuses with its SQLSTATE, and the next statement gets a working connection", async () => {
    const db = new PgDatabase(url, { max: 1 });
    try {
      await expect(
        db.readBinaryRows("SELECT $1::INT8 / 0 AS boom FROM generate_series(1, 3)", [1]),
      ).rejects.toMatchObject({ code: "22012" });
      const read = await db.readBinaryRows("SELECT $1::TEXT AS t", ["still here"]);
      expect(read.rows).toBe(1);
      expect(read.bytes.subarray(1 + 4 + 2 + 4).toString()).toBe("still here");
    } finally {
      await db.close();
    }
  });
});
