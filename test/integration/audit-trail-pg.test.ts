/** The audit trail port on real PostgreSQL: the same conformance suite as the fake and PGlite. */
import { inject } from "vitest";
import { SqlAuditTrail } from "../../src/adapters/sql/audit-trail.js";
import { openPgHotStore } from "../../src/adapters/sql/index.js";
import { sqlDate } from "../../src/adapters/sql/hot-store/rows.js";
import { auditTrailConformance } from "../conformance/audit-trail.js";
import { failNextAuditInsert } from "../support/audit-faults.js";
import { freshDatabase } from "../support/integration-resources.js";

auditTrailConformance("PostgreSQL", async () => {
  const database = await freshDatabase(inject("databaseUrl"));
  const store = await openPgHotStore(database.url, { migrate: true });
  return {
    trail: new SqlAuditTrail(store.db),
    hotStore: store,
    storeNow: async () => {
      const { rows } = await store.db.query<{ now: string }>("SELECT now() AS now");
      return sqlDate(rows[0]!.now);
    },
    failNextAuditWrite: () => failNextAuditInsert(store.db),
    async cleanup() {
      await store.close();
      await database.drop();
    },
  };
});
