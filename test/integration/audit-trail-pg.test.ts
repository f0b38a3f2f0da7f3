/** The audit trail port on real PostgreSQL: the same conformance suite as the fake and PGlite. */
import { inject } from "vitest";
import { SqlAuditTrail } from "../../src/adapters/sql/audit-trail.js";
import { PgDatabase } from "../../src/adapters/sql/database.js";
import { openPgHotStore } from "../../src/adapters/sql/index.js";
import { auditTrailConformance } from "../conformance/audit-trail.js";
import { failNextAuditInsert, sqlAuditTamper } from "../support/audit-faults.js";
import { freshDatabase } from "../support/integration-resources.js";

auditTrailConformance("PostgreSQL", async () => {
  const database = await freshDatabase(inject("databaseUrl"));
  const store = await openPgHotStore(database.url, { migrate: true });
  const others: PgDatabase[] = [];
  return {
    trail: new SqlAuditTrail(store.db),
    hotStore: store,
    // The trail's times have microseconds, `since` milliseconds: the store's "now" is the
    // first whole millisecond after the call, so nothing recorded before it is listed after.
    storeNow: async () => {
      const ms = async () => {
        const { rows } = await store.db.query<{ ms: string }>(
          "SELECT floor(extract(epoch from clock_timestamp()) * 1000) AS ms",
        );
        return Number(rows[0]!.ms);
      };
      const start = await ms();
      let now = start;
      for (let i = 0; i < 10_000 && now === start; i++) now = await ms();
      return new Date(now);
    },
    failNextAuditWrite: () => failNextAuditInsert(store.db),
    // Another process: its own pool, its own keys.
    otherWriter: () => {
      const other = new PgDatabase(database.url, { max: 1 });
      others.push(other);
      return new SqlAuditTrail(other);
    },
    tamper: sqlAuditTamper(store.db),
    async cleanup() {
      for (const other of others) await other.close();
      await store.close();
      await database.drop();
    },
  };
});
