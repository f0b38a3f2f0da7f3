import { MemoryAuditTrail } from "../../src/adapters/memory-audit-trail.js";
import { SqlAuditTrail } from "../../src/adapters/sql/audit-trail.js";
import { sqlDate } from "../../src/adapters/sql/hot-store/rows.js";
import type { Clock } from "../../src/ports/clock.js";
import { failNextAuditInsert, memoryAuditTamper, sqlAuditTamper } from "../support/audit-faults.js";
import { freshPgliteHotStore } from "../support/pglite-template.js";
import { auditTrailConformance } from "./audit-trail.js";

/** A clock one millisecond further on at every reading, as a database's clock moves between statements. */
function tickingClock(): Clock {
  let at = Date.parse("2026-06-01T00:00:00Z");
  return { now: () => new Date(at++) };
}

auditTrailConformance("in memory", async () => {
  const store = await freshPgliteHotStore();
  const clock = tickingClock();
  const trail = new MemoryAuditTrail(clock, store);
  return {
    trail,
    hotStore: store,
    storeNow: async () => clock.now(),
    failNextAuditWrite: () => {
      trail.failNext = new Error("injected: the audit write failed");
    },
    otherWriter: () => trail.otherWriter(),
    tamper: memoryAuditTamper(trail),
    cleanup: () => store.close(),
  };
});

auditTrailConformance("PGlite (in memory)", async () => {
  const store = await freshPgliteHotStore();
  return {
    trail: new SqlAuditTrail(store.db),
    hotStore: store,
    storeNow: async () => {
      const { rows } = await store.db.query<{ now: string }>("SELECT now() AS now");
      return sqlDate(rows[0]!.now);
    },
    failNextAuditWrite: () => failNextAuditInsert(store.db),
    // PGlite has one connection: another writer is another trail on it, with its own keys.
    otherWriter: () => new SqlAuditTrail(store.db),
    tamper: sqlAuditTamper(store.db),
    cleanup: () => store.close(),
  };
});
