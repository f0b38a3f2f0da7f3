/** The audit trail port on real PostgreSQL: the same conformance suite as the fake and PGlite. */
import { randomUUID } from "node:crypto";
import { describe, expect, inject, it } from "vitest";
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

describe("the audit chain under concurrent writers on PostgreSQL", () => {
  it("two processes writing at once never fork the chain: every row takes the next place, in commit order", async () => {
    const database = await freshDatabase(inject("databaseUrl"));
    const store = await openPgHotStore(database.url, { migrate: true });
    const processes = [
      new PgDatabase(database.url, { max: 4 }),
      new PgDatabase(database.url, { max: 4 }),
    ];
    try {
      const caller = { kind: "cli", osUser: "ops", host: "h" } as const;
      const writes = processes.flatMap((db, p) => {
        const trail = new SqlAuditTrail(db);
        return Array.from({ length: 30 }, async (_, i) => {
          const a = {
            id: randomUUID(),
            action: i % 3 === 0 ? "tables pause" : "restore",
            target: `writer-${p}/${i}`,
            tableId: null,
            caller,
            arguments: { i },
          };
          if (i % 3 === 0) {
            await trail.commitWith(
              a,
              async () => i,
              (n) => ({ outcome: "done", count: n }),
            );
            return;
          }
          await trail.begin(a);
          await trail.conclude(a, { outcome: "done", count: i });
        });
      });
      await Promise.all(writes);
      const verdict = await new SqlAuditTrail(store.db).verify();
      // 2 × (10 one-row actions + 20 intents and their outcomes).
      expect(verdict).toMatchObject({ intact: true, records: 100n, head: { seq: 100n } });
      const { rows } = await store.db.query<{ n: string; distinct_seq: string; max: string }>(
        "SELECT count(*) AS n, count(DISTINCT seq) AS distinct_seq, max(seq) AS max FROM pulpitum_v4_audit",
      );
      expect(rows[0]).toEqual({ n: "100", distinct_seq: "100", max: "100" });
    } finally {
      for (const db of processes) await db.close();
      await store.close();
      await database.drop();
    }
  }, 60_000);
});
