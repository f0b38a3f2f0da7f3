/** The hot store's operator methods (listing, held buckets, table drop) on real PostgreSQL. */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, inject } from "vitest";
import { openPgHotStore } from "../../src/adapters/sql/index.js";
import {
  heldBucketsConformance,
  hotStoreOperationsConformance,
} from "../conformance/hot-store-operations.js";

const serverUrl = inject("databaseUrl");
const created: string[] = [];

/** A fresh database on the test server; dropped when the file finishes. */
async function freshDatabaseUrl(): Promise<string> {
  const name = `pulpitum_ops_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  created.push(name);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

afterAll(async () => {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    for (const name of created) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
});

const openFresh = async () => {
  const store = await openPgHotStore(await freshDatabaseUrl(), { migrate: true });
  return { store, cleanup: () => store.close() };
};

hotStoreOperationsConformance("PostgreSQL", openFresh);
heldBucketsConformance("PostgreSQL", openFresh);
