/**
 * Moving the database's clock in a test. Cutoffs are taken from the
 * database's `now()` inside the statements that act on them
 * (src/adapters/sql/hot-store/database-cutoffs.ts), so a test of New Year or
 * of a window closing must move the database's clock, not only the process's.
 *
 * PostgreSQL (and PGlite) look a function up along `search_path`, and a
 * schema named before `pg_catalog` there comes first: this installs
 * `now()` and `clock_timestamp()` in a schema of their own that return the
 * real clock plus an offset kept in a table, names that schema first for
 * this session and every later one of the database, and sets the offset.
 * Nothing in the product changes; a test that never calls this sees the
 * real clock.
 */
import type { SqlDatabase, SqlExecutor } from "../../src/adapters/sql/database.js";

const SCHEMA = "pulpitum_test_clock";
// public first: tables a migration creates go there, and it holds no now() to shadow ours.
const PATH = `public, ${SCHEMA}, pg_catalog`;

/** Make the database's clock read `at` now (and run on from there with the real clock). */
export async function setDatabaseClock(
  target: SqlExecutor | object,
  at: Date | string,
): Promise<void> {
  const db = executorOf(target);
  const offsetMs = new Date(at).getTime() - Date.now();
  await db.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
  await db.query(`CREATE TABLE IF NOT EXISTS ${SCHEMA}.offset_ms (ms FLOAT8 NOT NULL)`);
  await db.query(`DELETE FROM ${SCHEMA}.offset_ms`);
  await db.query(`INSERT INTO ${SCHEMA}.offset_ms (ms) VALUES ($1::FLOAT8)`, [offsetMs]);
  const shifted = (base: string) =>
    `SELECT ${base} + make_interval(secs => (SELECT ms FROM ${SCHEMA}.offset_ms) / 1000.0)`;
  await db.query(
    `CREATE OR REPLACE FUNCTION ${SCHEMA}.now() RETURNS TIMESTAMPTZ LANGUAGE sql STABLE
       AS $$ ${shifted("pg_catalog.now()")} $$`,
  );
  await db.query(
    `CREATE OR REPLACE FUNCTION ${SCHEMA}.clock_timestamp() RETURNS TIMESTAMPTZ LANGUAGE sql VOLATILE
       AS $$ ${shifted("pg_catalog.clock_timestamp()")} $$`,
  );
  await db.query(
    `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = ${PATH}', current_database()); END $$`,
  );
  await db.query(`SET search_path = ${PATH}`);
  await everyPooledConnection(db, `SET search_path = ${PATH}`);
}

/**
 * A pool's connections opened before the ALTER DATABASE keep their old
 * `search_path`: run `statement` on each by holding many of them at once
 * (a plain SET inside a transaction lasts for the session).
 */
async function everyPooledConnection(db: SqlExecutor, statement: string): Promise<void> {
  const pool = db as Partial<SqlDatabase>;
  if (db.constructor.name !== "PgDatabase" || pool.transaction === undefined) return;
  await Promise.all(
    Array.from({ length: 24 }, () =>
      pool.transaction!(async (tx) => {
        await tx.query(statement);
        await tx.query("SELECT pg_sleep(0.2)");
      }, "setDatabaseClock"),
    ),
  );
}

/** The executor of a SQL hot store (its `db`), or `target` itself. */
function executorOf(target: SqlExecutor | object): SqlExecutor {
  const db = (target as { db?: SqlExecutor }).db;
  if (db !== undefined) return db;
  if (typeof (target as SqlExecutor).query === "function") return target as SqlExecutor;
  throw new Error("setDatabaseClock: expected a SQL hot store or a SqlExecutor");
}
