/**
 * `npm start` in an operator's shell, where DATABASE_URL and
 * PULPITUM_ARCHIVE_URL name real stores: the demo runs on its own embedded
 * store and leaves them untouched, unless `--use-configured-stores` asks.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ListObjectsV2Command } from "@aws-sdk/client-s3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { runCli } from "../support/cli.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";

describe("pulpitum start with DATABASE_URL and PULPITUM_ARCHIVE_URL set", () => {
  let db: { url: string; drop(): Promise<void> };
  let bucket: string;
  let home: string;
  let env: Record<string, string | undefined>;
  const endpoint = inject("awsEndpointUrl");
  const s3 = s3Client(endpoint);

  beforeAll(async () => {
    db = await freshDatabase(inject("databaseUrl"));
    bucket = await freshBucket(endpoint);
    home = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-start-"));
    env = {
      DATABASE_URL: db.url,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/prod`,
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      PULPITUM_HOME: home,
      ARCHIVER_ELIGIBLE_BEFORE: undefined,
    };
    // A production database is migrated: nothing would stop the demo from writing into it.
    const migrated = await runCli(["migrate"], env);
    expect(migrated.code, migrated.stderr).toBe(0);
  });
  afterAll(async () => {
    s3.destroy();
    rmSync(home, { recursive: true, force: true });
    await db.drop();
  });

  /** Registered tables and hot rows in the configured database. */
  async function configuredDatabase(): Promise<{ tables: number; records: number }> {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const count = async (table: string) =>
        Number((await client.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
      return {
        tables: await count("pulpitum_v4_tables"),
        records: await count("pulpitum_v4_records"),
      };
    } finally {
      await client.end();
    }
  }

  async function objectsInBucket(): Promise<number> {
    return (await s3.send(new ListObjectsV2Command({ Bucket: bucket }))).KeyCount ?? 0;
  }

  it("runs the demo on its own embedded store, says so, and writes nothing to the configured database or bucket", async () => {
    const run = await runCli(["start"], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(
      /DATABASE_URL and PULPITUM_ARCHIVE_URL are set and ignored: the demo runs on its own embedded store under PULPITUM_HOME.*--use-configured-stores/,
    );
    expect(run.stdout).toContain(`embedded PGlite in ${path.join(home, "db")}`);
    expect(run.stdout).toMatch(/archived \d+ buckets: /);
    expect(existsSync(path.join(home, "archive"))).toBe(true);

    expect(await configuredDatabase()).toEqual({ tables: 0, records: 0 });
    expect(await objectsInBucket()).toBe(0);
  }, 280_000);

  it("with --use-configured-stores seeds and archives the sample in the configured database and bucket", async () => {
    const run = await runCli(["start", "--use-configured-stores"], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toMatch(/ignored/);
    expect(run.stdout).toContain("Pulpitum on the configured database and archive");
    const after = await configuredDatabase();
    expect(after.tables).toBe(1);
    expect(after.records).toBeGreaterThan(0);
    expect(await objectsInBucket()).toBeGreaterThan(0);
  }, 280_000);
});
