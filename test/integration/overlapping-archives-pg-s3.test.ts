/**
 * Two `pulpitum archive --once` runs that overlap (two cron jobs), as real
 * processes on PostgreSQL and S3: together they archive every eligible
 * bucket exactly once, neither stops while unleased eligible buckets
 * remain, and both exit 0 when nothing failed, the buckets one left being
 * those the other, alive, finished.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { runCli, spawnCli } from "../support/cli.js";
import { freshBucket, freshDatabase } from "../support/integration-resources.js";

const PARTITIONS = 50;
const MONTHS = ["01", "02", "03", "04"];
const BUCKETS = PARTITIONS * MONTHS.length;

describe("two overlapping archive --once runs on PostgreSQL and S3", () => {
  let database: { url: string; drop(): Promise<void> };
  let dir: string;
  let env: Record<string, string | undefined>;
  const counts = async (table: string) => {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ state: string; hot_deleted: boolean; n: string }>(
        `SELECT state, hot_deleted, count(*) AS n FROM pulpitum_v4_bucket_metadata
          WHERE table_id = $1 GROUP BY state, hot_deleted`,
        [table],
      );
      return rows.map((r) => [r.state, r.hot_deleted, Number(r.n)]);
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    const endpoint = inject("awsEndpointUrl");
    database = await freshDatabase(inject("databaseUrl"));
    const bucket = await freshBucket(endpoint);
    dir = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-overlap-"));
    env = {
      DATABASE_URL: database.url,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/overlap`,
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      PULPITUM_HOME: dir,
      ARCHIVER_ELIGIBLE_BEFORE: "2026-01-01T00:00:00Z",
      ARCHIVER_WORKERS: "4",
    };
    const migrated = await runCli(["migrate"], env);
    expect(migrated.code, migrated.stderr).toBe(0);
  }, 120_000);
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await database.drop();
  });

  for (const attempt of [1, 2]) {
    it(`try ${attempt}: both exit 0 and together archive all ${BUCKETS} buckets, each exactly once`, async () => {
      const table = `chat${attempt}`;
      expect((await runCli(["tables", "create", table, "--strategy", "month"], env)).code).toBe(0);
      const lines: string[] = [];
      for (let p = 0; p < PARTITIONS; p++)
        for (const month of MONTHS)
          for (const day of ["02", "03", "04"])
            lines.push(
              JSON.stringify({
                partition_key: Buffer.from(`room/${p}`).toString("base64"),
                event_time: `2025-${month}-${day}T00:00:00Z`,
                sort_key: Buffer.from(day).toString("base64"),
                value: Buffer.from(`${p} ${month} ${day}`).toString("base64"),
              }),
            );
      const file = path.join(dir, `${table}.ndjson`);
      writeFileSync(file, lines.join("\n"));
      const imported = await runCli(["import", table, file], env);
      expect(imported.code, imported.stderr).toBe(0);

      const first = spawnCli(["archive", "--once"], env);
      const second = spawnCli(["archive", "--once"], env);
      const [a, b] = await Promise.all([first.exited, second.exited]);

      const report = `first (${a.code}):\n${first.stdout()}${first.stderr()}\nsecond (${b.code}):\n${second.stdout()}${second.stderr()}`;
      expect(a.code, report).toBe(0);
      expect(b.code, report).toBe(0);
      const archivedBy = (out: string) =>
        out.split("\n").filter((l) => l.startsWith(`archived ${table}/`));
      const byFirst = archivedBy(first.stdout());
      const bySecond = archivedBy(second.stdout());
      expect(byFirst.length + bySecond.length, report).toBe(BUCKETS);
      expect(new Set([...byFirst, ...bySecond].map((l) => l.slice(0, l.indexOf(": ")))).size).toBe(
        BUCKETS,
      );
      expect(await counts(table)).toEqual([["archived", true, BUCKETS]]);
      for (const run of [first, second])
        expect(run.stdout(), report).toMatch(/^archive finished: \d+ buckets archived .*0 failed/m);
    }, 600_000);
  }
});
