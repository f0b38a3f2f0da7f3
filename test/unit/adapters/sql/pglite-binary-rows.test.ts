/**
 * Binary rows through PGlite's raw protocol entry (pglite-database.ts): a
 * read returns the server's rows, a refused statement rejects with its
 * SQLSTATE and leaves the database usable, and a read waits for a
 * transaction in flight instead of running inside it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PgliteDatabase } from "../../../../src/adapters/sql/pglite-database.js";
import { ServerError } from "../../../../src/adapters/sql/wire-rows.js";
import { DiskFullError } from "../../../../src/errors.js";

describe("binary rows on PGlite", () => {
  let db: PgliteDatabase;
  beforeAll(async () => {
    db = await PgliteDatabase.open(undefined);
  }, 60_000);
  afterAll(async () => {
    await db.close();
  });

  it("reads the rows a statement returns, every column binary", async () => {
    const read = await db.readBinaryRows(
      "SELECT g AS n, $2::BYTEA AS b FROM generate_series(1, $1::INT8) AS g",
      [3, Uint8Array.of(0, 0xff)],
    );
    expect(read.rows).toBe(3);
    // Each row: type and length, 2 fields, an 8-byte int8 and a 2-byte bytea.
    expect(read.bytes.byteLength).toBe(3 * (1 + 4 + 2 + 4 + 8 + 4 + 2));
    expect(read.bytes.readBigInt64BE(1 + 4 + 2 + 4)).toBe(1n);
    expect([...read.bytes.subarray(19 + 4, 19 + 6)]).toEqual([0, 0xff]);
  });

  it("rejects a statement the server refuses with its SQLSTATE, and the next statement runs", async () => {
    await expect(
      db.readBinaryRows("SELECT $1::INT8 / 0 AS boom FROM generate_series(1, 3)", [1]),
    ).rejects.toSatisfy((e) => e instanceof ServerError && e.code === "22012");
    expect((await db.readBinaryRows("SELECT 1 AS one", [])).rows).toBe(1);
    expect((await db.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
  });

  it("names a full disk as the embedded database's, as every other statement does", async () => {
    // What a sort spilling to a full disk raises; the read's own error path, not a fault hook.
    await db.query(
      "CREATE FUNCTION disk_full() RETURNS INT8 LANGUAGE plpgsql AS $$ BEGIN " +
        "RAISE EXCEPTION 'could not write to file \"base/pgsql_tmp/t0\": No space left on device' " +
        "USING ERRCODE = '53100'; END $$",
    );
    await expect(db.readBinaryRows("SELECT disk_full() AS n", [])).rejects.toSatisfy(
      (e) =>
        e instanceof DiskFullError &&
        /the embedded database's disk is full \(in memory\)/.test(e.message) &&
        e.cause instanceof ServerError,
    );
  });

  it("waits for a transaction in flight rather than read inside it or break it", async () => {
    await db.query("CREATE TABLE t (n INT8)");
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let inserted!: () => void;
    const insertedOnce = new Promise<void>((resolve) => (inserted = resolve));
    const writer = db.transaction(async (tx) => {
      await tx.query("INSERT INTO t VALUES (1)");
      inserted();
      await held;
      await tx.query("INSERT INTO t VALUES (2)");
    }, "test");
    await insertedOnce;
    const read = db.readBinaryRows("SELECT n FROM t ORDER BY n", []);
    // The read must not see the uncommitted row nor run between the transaction's statements.
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    await writer;
    expect((await read).rows).toBe(2);
  });
});
