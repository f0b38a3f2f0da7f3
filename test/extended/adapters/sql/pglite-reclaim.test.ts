/**
 * When a run reclaims the embedded store's space on its own: after deleting
 * at least 10,000 rows, and at least a quarter of the live rows left, so a
 * small cleanup never costs a rewrite of a large table.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RECORDS_TABLE } from "../../../../src/adapters/sql/migrations.js";
import {
  embeddedDatabaseOf,
  estimatedLiveRows,
  worthReclaiming,
} from "../../../../src/adapters/sql/pglite-reclaim.js";
import type { PgliteDatabase } from "../../../../src/adapters/sql/pglite-database.js";
import type { SqlHotStore } from "../../../../src/adapters/sql/sql-hot-store.js";
import { freshPgliteHotStore } from "../../../support/pglite-template.js";

describe("the embedded store's automatic reclaim", () => {
  let store: SqlHotStore;
  let db: PgliteDatabase;

  beforeEach(async () => {
    store = await freshPgliteHotStore();
    db = embeddedDatabaseOf(store)!;
    // 60,000 live rows, 200 bytes of value each.
    await db.query(
      `INSERT INTO ${RECORDS_TABLE} (table_id, partition_key, bucket_key, event_time, sort_key, value)
       SELECT 't', '\\x00', 'month:2024-01', '2024-01-01T00:00:00Z', int8send(g), decode(repeat('ab', 100), 'hex')
         FROM generate_series(1, 60000) g`,
    );
  }, 60_000);
  afterEach(async () => {
    await store.close();
  });

  it("estimates the live rows of the records table within 10%", async () => {
    const estimate = await estimatedLiveRows(db);
    expect(estimate).toBeGreaterThan(54_000);
    expect(estimate).toBeLessThan(66_000);
  });

  // A quarter of 60,000 live rows is 15,000; the estimate's 10% either side
  // puts the threshold between 13,500 and 16,500, so the cases stay clear of it.
  it("reclaims after 18,000 deleted rows beside 60,000 live ones, but not after 9,999 or 12,000 deleted rows", async () => {
    expect(await worthReclaiming(db, 9_999)).toBe(false);
    expect(await worthReclaiming(db, 12_000)).toBe(false);
    expect(await worthReclaiming(db, 18_000)).toBe(true);
  });

  it("is not offered for a hot store that is not embedded", () => {
    expect(embeddedDatabaseOf({} as never)).toBeNull();
  });
});
