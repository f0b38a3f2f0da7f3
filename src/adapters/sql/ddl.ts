/**
 * DDL the migrations run (migrations.ts): statements retried when a
 * concurrent migration collided with them in the catalog, and named
 * constraints added once.
 */
import type { SqlDatabase } from "./database.js";

/** Concurrent `CREATE … IF NOT EXISTS` on PostgreSQL can still collide in the catalog. */
const CONCURRENT_DDL_SQLSTATES = new Set(["23505", "42P07", "42710"]);

/**
 * Add a named constraint unless the table has it: PostgreSQL and CockroachDB
 * share no ADD CONSTRAINT IF NOT EXISTS, so the catalog is asked first, and
 * a concurrent migration that added it in between is a duplicate (42710).
 */
export async function addConstraintOnce(
  db: SqlDatabase,
  table: string,
  name: string,
  definition: string,
): Promise<void> {
  const exists = async () =>
    (
      await db.query(
        `SELECT 1 FROM information_schema.table_constraints
          WHERE table_name = $1::TEXT AND constraint_name = $2::TEXT
            AND table_schema = current_schema()`,
        [table, name],
      )
    ).rows.length > 0;
  if (await exists()) return;
  try {
    await db.query(`ALTER TABLE ${table} ADD CONSTRAINT ${name} ${definition}`);
  } catch (error) {
    if ((error as { code?: unknown }).code === "42710" && (await exists())) return;
    throw error;
  }
}

export async function ddl(db: SqlDatabase, statement: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await db.query(statement);
      return;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (attempt >= 5 || typeof code !== "string" || !CONCURRENT_DDL_SQLSTATES.has(code)) {
        throw error;
      }
    }
  }
}
