/** The audit trail scenarios (test/support/audit-scenarios.ts) on the embedded store. */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PgliteDatabase } from "../../../src/adapters/sql/pglite-database.js";
import { auditScenarios } from "../../support/audit-scenarios.js";

auditScenarios("embedded (PGlite)", async () => {
  const home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-audit-"));
  return {
    env: {
      PULPITUM_HOME: home,
      DATABASE_URL: undefined,
      PULPITUM_ARCHIVE_URL: undefined,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
    },
    dir: home,
    dbUser: "postgres",
    embedded: true,
    async sql(text) {
      const db = await PgliteDatabase.open(path.join(home, "db"));
      try {
        await db.query(text);
      } finally {
        await db.close();
      }
    },
    close: async () => rmSync(home, { recursive: true, force: true }),
  };
});
