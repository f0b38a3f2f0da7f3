/**
 * One migrated in-memory PGlite per test worker, cloned for each test:
 * creating a cluster costs seconds, a clone a fraction of that.
 */
import { PgliteDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";

let template: Promise<PgliteDatabase> | undefined;

export async function freshPgliteHotStore(): Promise<SqlHotStore> {
  template ??= (async () => {
    const db = await PgliteDatabase.open(undefined);
    await new SqlHotStore(db, { ownsDatabase: false }).migrate();
    return db;
  })();
  const db = await (await template).cloneInMemory();
  return new SqlHotStore(db);
}
