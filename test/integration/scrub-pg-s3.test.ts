/**
 * Integrity end to end on PostgreSQL and S3 (moto, or any endpoint in
 * AWS_ENDPOINT_URL): every kind of damage to an archived bucket (one byte
 * changed in a payload, manifest or catalog entry; each of them deleted) is
 * found by the read that uses the object, by `verify` and by the scheduled
 * scrub function, and no row of a damaged bucket is served. Then through
 * the CLI: `pulpitum verify` exits 4 naming the bucket, and `status` shows
 * the count of corrupt buckets and when the scrub last completed.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { S3ObjectStore } from "../../src/adapters/object-store/s3.js";
import { PgDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import { runCli } from "../support/cli.js";
import { flipValueDataPage } from "../support/integrity.js";
import { freshBucket, freshDatabase, s3Client } from "../support/integration-resources.js";
import { archiveAndDamage, DAMAGE, runDamageCase, scheduledScrub } from "../support/scrub-cases.js";
import { harnessOn } from "../support/workflow-harness.js";

describe("integrity end to end on PostgreSQL and S3", () => {
  let bucket: string;
  let temp: string;
  const endpoint = inject("awsEndpointUrl");
  const closers: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    bucket = await freshBucket(endpoint);
    temp = mkdtempSync(path.join(os.tmpdir(), "pulpitum-it-scrub-"));
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    rmSync(temp, { recursive: true, force: true });
  });

  /** A harness on a database of its own and its own prefix of the bucket. */
  async function world(prefix: string) {
    const db = await freshDatabase(inject("databaseUrl"));
    const store = new SqlHotStore(new PgDatabase(db.url));
    await store.migrate();
    const client = s3Client(endpoint);
    closers.push(
      () => db.drop(),
      () => store.close(),
      () => client.destroy(),
    );
    const h = harnessOn(store, new S3ObjectStore({ bucket, client }), { archivePrefix: prefix });
    return { h, url: db.url };
  }

  DAMAGE.forEach((damage, i) => {
    it(`${damage.name}: the read, verify and the scheduled scrub each find it; no row of it is served`, async () => {
      const { h } = await world(`case${i}`);
      await runDamageCase(h, damage, temp);
    });
  });

  it("pulpitum verify exits 4 naming the corrupt bucket, and status counts it with the scrub's last completion", async () => {
    const { h, url } = await world("cli");
    const damaged = await archiveAndDamage(h, {
      name: "data page",
      format: "parquet",
      target: "payload",
      change: flipValueDataPage,
    });
    const env = {
      DATABASE_URL: url,
      PULPITUM_ARCHIVE_URL: `s3://${bucket}/cli`,
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      PULPITUM_HOME: temp,
    };
    const before = await runCli(["status", "--json"], env);
    expect(before.code, before.stderr).toBe(0);
    expect(JSON.parse(before.stdout).integrity).toEqual({
      corrupt_buckets: 0,
      corrupt: [],
      scrub_last_run_at: null,
      scrub_last_completed_at: null,
    });

    const verified = await runCli(["verify", "--json"], env);
    expect(verified.code, verified.stderr).toBe(4);
    const report = JSON.parse(verified.stdout);
    expect(report).toMatchObject({ verified: 0, corrupt: 1, corrupt_buckets_total: 1 });
    expect(report.problems[0]).toMatchObject({
      bucket: "ledger/acct-7/month:2025-03",
      kind: "corrupt",
    });
    expect(report.problems[0].problem).toContain(damaged.payloadKey);

    const read = await runCli(["read", "ledger", "acct-7", "--json"], env);
    expect(read.code).toBe(4);
    expect(read.stderr).toContain("archived bucket ledger/acct-7/month:2025-03 was found corrupt");
    expect(read.stdout).toBe("");

    await scheduledScrub(h);
    const after = await runCli(["status", "--json"], env);
    expect(after.code, after.stderr).toBe(0);
    const integrity = JSON.parse(after.stdout).integrity;
    expect(integrity).toMatchObject({
      corrupt_buckets: 1,
      corrupt: [{ bucket: "ledger/acct-7/month:2025-03" }],
    });
    expect(integrity.scrub_last_completed_at).toBe(h.clock.now().toISOString());
    const text = await runCli(["status"], env);
    expect(text.stdout).toContain("integrity: 1 buckets marked corrupt; scrub last completed");
  });
});
