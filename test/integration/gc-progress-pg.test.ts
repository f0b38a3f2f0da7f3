/** The GC progress port on real PostgreSQL: two connections really race for the lease. */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { inject } from "vitest";
import { SqlGcProgressStore } from "../../src/adapters/sql/gc-progress.js";
import { openPgHotStore } from "../../src/adapters/sql/index.js";
import { gcProgressConformance } from "../conformance/gc-progress.js";

const serverUrl = inject("databaseUrl");

gcProgressConformance("PostgreSQL", async () => {
  const name = `pulpitum_gc_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const store = await openPgHotStore(url.toString(), { migrate: true });
  return {
    progress: new SqlGcProgressStore(store.db),
    async cleanup() {
      await store.close();
      const dropper = new pg.Client({ connectionString: serverUrl });
      await dropper.connect();
      try {
        await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
});
