/**
 * Factories for the SQL hot store: `pg` for PostgreSQL and CockroachDB,
 * PGlite for the embedded default.
 */
import { PgDatabase, type PgDatabaseOptions } from "./database.js";
import { PgliteDatabase, type PgliteDatabaseOptions } from "./pglite-database.js";
import { SqlHotStore } from "./sql-hot-store.js";

export { PgDatabase } from "./database.js";
export { PgliteDatabase } from "./pglite-database.js";
export type { SqlDatabase, SqlExecutor, TransactionFaults } from "./database.js";
export { MIGRATIONS, runMigrations } from "./migrations.js";
export { SqlHotStore } from "./sql-hot-store.js";

export interface OpenHotStoreOptions {
  /** Run the migrations before returning (default false: `pulpitum migrate` does it). */
  readonly migrate?: boolean;
}

/** A hot store on PostgreSQL or CockroachDB at `url`. */
export async function openPgHotStore(
  url: string,
  options: PgDatabaseOptions & OpenHotStoreOptions = {},
): Promise<SqlHotStore> {
  const store = new SqlHotStore(new PgDatabase(url, options));
  return await prepare(store, options);
}

/** A hot store on embedded PGlite in `dataDir`, or in memory when undefined. */
export async function openPgliteHotStore(
  dataDir: string | undefined,
  options: PgliteDatabaseOptions & OpenHotStoreOptions = {},
): Promise<SqlHotStore> {
  const store = new SqlHotStore(await PgliteDatabase.open(dataDir, options));
  return await prepare(store, options);
}

async function prepare(store: SqlHotStore, options: OpenHotStoreOptions): Promise<SqlHotStore> {
  if (options.migrate !== true) return store;
  try {
    await store.migrate();
    return store;
  } catch (error) {
    await store.close();
    throw error;
  }
}
